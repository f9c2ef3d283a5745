"""/mutate: a pod's legacy GPU requests become DRA claims, as a JSON patch of only what changed.

Pods of one shape (the replicas of a workload) are translated once. The cluster is reached
only through the `ClusterView` protocol: the same logic serves the live webhook, the offline
mode and the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.policy import Mode, Policy
from app.core.quota import Use, quota_warning, unguarded
from app.core.resources import asks_extended_resources
from app.core.skip import skip_reason
from app.core.translate import Path, Translation, describe, translate
from app.webhook.reviews import AdmissionRequest, allowed, encode_patch, namespace_of, patched
from app.webhook.view import ClusterView, Decision, TemplateError, Verdict, allow, deny

AUDIT_ANNOTATION = "gpu2dra.io/would-translate"


_MISSING: Any = object()


def _at(obj: Any, path: Path) -> Any:
    for step in path:
        try:
            obj = obj[step]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return obj


def _pointer(path: Path) -> str:
    return "/spec/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


def patch_ops(spec: Obj, translation: Translation) -> list[Obj]:
    """JSON patch for the subtrees the translation replaced: no whole-pod diff."""
    ops: list[Obj] = []
    for path in translation.touched:
        old, new = _at(spec, path), _at(translation.spec, path)
        if new is _MISSING:
            ops.append({"op": "remove", "path": _pointer(path)})
        else:
            op = "add" if old is _MISSING else "replace"
            ops.append({"op": op, "path": _pointer(path), "value": new})
    return ops


MEMO_SIZE = 1024  # pod shapes remembered: a cluster runs far fewer distinct GPU workloads

# What translate() reads of a container: the rest (image, mounts, a per-pod volume name...)
# differs between replicas without changing their translation.
_READ = ("name", "resources", "restartPolicy", "env", "command", "args")


def shape_of(spec: Obj) -> bytes:
    """Everything translate() reads of a pod spec, as bytes: replicas of a workload share it."""
    parts: list[Any] = [spec.get("resourceClaims"), spec.get("nodeSelector"), spec.get("affinity")]
    for name in ("containers", "initContainers"):
        items = spec.get(name)
        if isinstance(items, list):
            items = [[c.get(k) for k in _READ] if isinstance(c, dict) else c for c in items]
        parts.append(items)
    return orjson.dumps(parts)


class Outcome(NamedTuple):
    """What translating one shape of pod spec gives, the same for every pod of that shape."""

    catalog: Catalog  # the one it was computed with: a new catalog can change it
    warnings: tuple[str, ...]
    templates: tuple[Obj, ...]
    patch: str  # base64 JSON patch of the touched subtrees; "" when nothing changes
    # What the patch does, in words: audit mode's; worked out once, when first asked for.
    summary: Callable[[], str]
    uses: tuple[Use, ...] = ()  # (legacy resource, DeviceClass) the patch moves to DRA
    in_tree: str = ""  # why the in-tree extended-resource path serves it instead


@dataclass(frozen=True, slots=True)
class Mutator:
    policy: Policy
    # shape_of(spec) -> Outcome: the pods of a Deployment or Job are translated once
    _memo: dict[bytes, Outcome] = field(default_factory=dict, init=False, compare=False)

    def __call__(self, request: AdmissionRequest, cluster: ClusterView) -> Decision:
        uid = request["uid"]
        if request["kind"].get("kind") != "Pod" or request.get("subResource"):
            return allow(uid)
        if request["operation"] != "CREATE":
            return allow(uid)  # pod claims are immutable after CREATE
        pod = request.get("object") or {}
        namespace = namespace_of(request, pod)
        if skip_reason(pod, namespace, self.policy):
            return allow(uid)
        if not cluster.ready:
            return self.failed(uid, "has not synced its caches yet")
        mode = self.policy.mode_for(cluster.namespace_labels(namespace))
        spec = pod.get("spec")
        if mode == "disabled" or not isinstance(spec, dict) or not asks_extended_resources(spec):
            return allow(uid)
        outcome = self.outcome(spec, cluster.catalog)
        if not outcome.patch:
            if mode == "audit" and outcome.in_tree:
                why = f"gpu2dra audit: would leave it to the in-tree path ({outcome.in_tree})"
                return allow(uid, [why, *outcome.warnings])
            return allow(uid, outcome.warnings)
        # After the memo: the shape's translation is the same everywhere, its quotas are not.
        quotas = cluster.namespace_quotas(namespace)
        if quotas and (lifted := unguarded(outcome.uses, quotas, cluster.catalog)):
            return self.kept_under_quota(uid, mode, quota_warning(namespace, lifted))
        if mode == "audit":
            summary = outcome.summary()
            warnings = [f"gpu2dra audit: would {summary}", *outcome.warnings]
            annotations = {AUDIT_ANNOTATION: summary[:2000]}
            return Verdict("audit", allowed(uid, warnings, auditAnnotations=annotations))
        answer = Verdict("patched", patched(uid, outcome.patch, outcome.warnings))
        if request.get("dryRun") or cluster.has_templates(namespace, outcome.templates):
            return answer
        return self._after_templates(answer, namespace, outcome, cluster)

    def outcome(self, spec: Obj, catalog: Catalog) -> Outcome:
        """translate() and its patch, remembered per pod shape."""
        try:
            shape = shape_of(spec)
        except TypeError:  # orjson's: an integer JSON cannot hold; nothing to remember
            return self._translate(spec, catalog)
        known = self._memo.get(shape)
        if known is not None and known.catalog is catalog:
            return known
        outcome = self._translate(spec, catalog)
        if len(self._memo) >= MEMO_SIZE:
            del self._memo[next(iter(self._memo))]  # the oldest
        self._memo[shape] = outcome
        return outcome

    def _translate(self, spec: Obj, catalog: Catalog) -> Outcome:
        t = translate(spec, self.policy, catalog)
        if not t.changed:
            return Outcome(catalog, t.warnings, t.templates, "", str, in_tree=t.in_tree)
        try:
            patch = encode_patch(patch_ops(spec, t))
        except TypeError:  # orjson's: only a spec not read from JSON can hold such a value
            why = "the pod spec holds a value JSON cannot carry; pod left as is"
            return Outcome(catalog, (*t.warnings, why), (), "", str)
        summary = functools.cache(functools.partial(describe, spec, t))
        uses = t.uses
        return Outcome(catalog, t.warnings, t.templates, patch, summary, uses)

    @staticmethod
    def kept_under_quota(uid: str, mode: Mode, warning: str) -> Verdict:
        """Translating would lift a GPU quota: the pod stays on the device plugin."""
        if mode == "audit":
            warning = f"gpu2dra audit: would not translate: {warning}"
        return Verdict("quota", allowed(uid, [warning]))

    async def _after_templates(
        self, answer: Verdict, namespace: str, outcome: Outcome, cluster: ClusterView
    ) -> Verdict:
        try:
            await cluster.ensure_templates(namespace, outcome.templates)
        except TemplateError as err:
            uid = answer.response["uid"]
            why = f"could not create ResourceClaimTemplates: {err}"
            return self.failed(uid, why, outcome.warnings)
        return answer

    def failed(self, uid: str, why: str, warnings: Iterable[str] = ()) -> Verdict:
        """gpu2dra could not do its part: admit unchanged with a warning, or deny (onError)."""
        if self.policy.on_error == "deny":
            return deny(uid, f"gpu2dra {why}", code=503, warnings=warnings)
        return allow(uid, [f"gpu2dra {why}; pod admitted unchanged", *warnings])
