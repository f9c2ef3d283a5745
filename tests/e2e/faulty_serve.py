"""`python -m tests.e2e.faulty_serve serve …`: `gpu2dra serve` with a bug planted, for
test_fail_open.py. Deciding /mutate or /validate for an object labelled
`gpu2dra-test/fault: raise` raises, as a fault of gpu2dra's own would; every other object is
decided as `python -m app` decides it."""

from __future__ import annotations

from collections.abc import Set

from app.cli import main
from app.webhook import application
from app.webhook.clusterview import ClusterView
from app.webhook.mutate import Mutator
from app.webhook.reviews import AdmissionRequest
from app.webhook.validate import validate
from app.webhook.verdicts import Decision

FAULT_LABEL = "gpu2dra-test/fault"


def faulty(request: AdmissionRequest) -> bool:
    obj = request.get("object") or {}
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return bool(labels.get(FAULT_LABEL) == "raise")


def plant() -> None:
    mutate = Mutator.__call__

    def faulty_mutate(self: Mutator, request: AdmissionRequest, cluster: ClusterView) -> Decision:
        if faulty(request):
            raise RuntimeError("planted fault in /mutate")
        return mutate(self, request, cluster)

    def faulty_validate(
        request: AdmissionRequest, cluster: ClusterView, writers: Set[str] = frozenset()
    ) -> Decision:
        if faulty(request):
            raise RuntimeError("planted fault in /validate")
        return validate(request, cluster, writers)

    Mutator.__call__ = faulty_mutate  # type: ignore[method-assign]
    # create_app's handler reads the name from application's namespace on every request.
    application.validate = faulty_validate  # type: ignore[attr-defined]


if __name__ == "__main__":
    plant()
    raise SystemExit(main())
