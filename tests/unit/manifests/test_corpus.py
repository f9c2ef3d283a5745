"""Real manifests from the projects whose controllers gpu2dra knows (tests/corpus/manifests),
translated offline: each document's outcome is exactly the one tests/corpus/manifests/
expected.yaml records, and no document that asks for GPUs is passed over in silence.

To record a new file's outcome: `python -m tests.unit.manifests.test_corpus NAME.yaml`, then
read what it prints before adding it to expected.yaml."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.catalog import Catalog
from app.core.policy import Policy, load_policy
from app.core.resources import containers, legacy_amounts
from app.manifests.documents import load_documents, translate_documents
from app.manifests.podspecs import pod_specs, singular_containers

CORPUS = Path(__file__).resolve().parents[2] / "corpus" / "manifests"
EXPECTED = CORPUS / "expected.yaml"
FILES = sorted(p for p in CORPUS.glob("*.yaml") if p != EXPECTED)
_SOURCE = re.compile(r"# source: [\w.-]+/[\w.-]+/\S+@\S+\n")
_RAY = {"RayCluster": ("spec",), "RayJob": ("spec", "rayClusterSpec")}
_RAY["RayService"] = ("spec", "rayClusterConfig")


def _claims(doc: Any) -> int:
    return sum(len(s.get("resourceClaims") or []) for s in pod_specs(doc))


def _num_gpus(doc: Any) -> dict[str, str]:
    spec: Any = doc
    for step in _RAY.get(doc.get("kind"), ("-",)):
        spec = spec.get(step) if isinstance(spec, dict) else None
    if not isinstance(spec, dict):
        return {}
    groups = [("headGroupSpec", spec.get("headGroupSpec"))]
    groups += [(g.get("groupName"), g) for g in spec.get("workerGroupSpecs") or []]
    return {
        str(name): group["rayStartParams"]["num-gpus"]
        for name, group in groups
        if isinstance(group, dict) and "num-gpus" in (group.get("rayStartParams") or {})
    }


def outcomes(path: Path, policy: Policy, catalog: Catalog) -> list[dict[str, Any]]:
    """Per document: what it is, translated/left/untouched, and what the translation said."""
    docs = load_documents(path.read_text())
    result = translate_documents(
        docs, policy, catalog, namespace="default", mode="enabled", offline=True
    )
    out = []
    for number, (before, after) in enumerate(zip(docs, result.documents, strict=True), 1):
        name = (before.get("metadata") or {}).get("name")
        record: dict[str, Any] = {"document": f"{before.get('kind')} {name}"}
        warnings = [str(n.text) for n in result.notes if n.document == number]
        if after is not before:
            record["outcome"] = "translated"
            record["claims"] = _claims(after) - _claims(before)
            if gpus := _num_gpus(after):
                record["num-gpus"] = gpus
        else:
            record["outcome"] = "left" if warnings else "untouched"
        if warnings:
            record["warnings"] = warnings
        out.append(record)
    return out


def _asks_for_devices(doc: Any, policy: Policy) -> bool:
    def asks(container: dict[str, Any]) -> list[str]:
        return [r for r, n in legacy_amounts(container, policy).items() if n]

    in_specs = any(asks(c) for spec in pod_specs(doc) for _, _, c in containers(spec))
    return in_specs or bool(singular_containers(doc, asks))


def test_the_corpus_is_real_and_large_enough() -> None:
    assert len(FILES) >= 30
    for path in FILES:
        assert _SOURCE.match(path.read_text()), f"{path.name} does not name its source"
    assert sorted(yaml.safe_load(EXPECTED.read_text())) == [p.name for p in FILES]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_document_has_its_expected_outcome(
    path: Path, policy: Policy, catalog: Catalog
) -> None:
    assert outcomes(path, policy, catalog) == yaml.safe_load(EXPECTED.read_text())[path.name]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_no_document_asking_for_gpus_is_passed_over_silently(
    path: Path, policy: Policy, catalog: Catalog
) -> None:
    docs = load_documents(path.read_text())
    for doc, record in zip(docs, outcomes(path, policy, catalog), strict=True):
        if _asks_for_devices(doc, policy):
            assert record["outcome"] != "untouched", record["document"]


# The shared cases: what the default policy leaves, a `consumable` mapping moves where the
# cluster shares (offline, the cluster is unknown and the mapping is followed).
SHARED = {
    "gpu-operator-plugin-test.yaml": ["translated"],
    "gpu-operator-plugin-mps-test.yaml": ["translated"],
    "hami-default-use.yaml": ["left"],  # nvidia.com/gpucores has no equivalent
    "hami-dynamic-mig.yaml": ["left"],  # HAMi's annotations
}


@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_cases_move_with_a_consumable_mapping(name: str, catalog: Catalog) -> None:
    from app.core.policy import parse_policy

    consumable = {"shares": 1, "memory": "nvidia.com/gpumem"}
    policy = parse_policy(
        {
            "mappings": {
                "nvidia.com/gpu": {"deviceClassName": "gpu.nvidia.com", "consumable": consumable}
            }
        }
    )
    found = outcomes(CORPUS / name, policy, catalog)
    assert [r["outcome"] for r in found] == SHARED[name]
    if SHARED[name] == ["left"]:
        assert not any(
            "nvidia.com/gpumem:" in w or "asks for nvidia.com/gpumem," in w
            for r in found
            for w in r["warnings"]
        ), "gpumem itself is covered"


if __name__ == "__main__":
    policy = load_policy(None)
    catalog = Catalog.of(policy.device_classes)
    chosen = [CORPUS / name for name in sys.argv[1:]] or FILES
    found = {p.name: outcomes(p, policy, catalog) for p in chosen}
    print(yaml.safe_dump(found, sort_keys=True, width=100), end="")
