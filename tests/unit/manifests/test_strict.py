"""`gpu2dra translate --strict`, for CI: exit 3 when a document whose pods ask for GPUs is
left as is, and one line on stderr counting what was translated, left and unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.cli import main
from app.core.catalog import Catalog
from app.core.policy import Policy
from app.manifests.render import translate_text

MIX = """\
kind: ConfigMap
metadata: {name: c}
---
apiVersion: v1
kind: Pod
metadata: {name: ok}
spec:
  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: shared}
spec:
  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu.shared: 1}}}]
---
apiVersion: apps.kruise.io/v1alpha1
kind: CloneSet
metadata: {name: cs}
spec:
  template:
    spec:
      containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: d}}
- apiVersion: v1
  kind: Pod
  metadata: {name: ok2}
  spec:
    containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: 2}}}]
"""
SUMMARY = "6 documents: 2 translated, 2 left (no-rule 1, shared-replicas 1), 2 unchanged"


def test_strict_exits_3_and_counts_when_a_gpu_pod_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "mix.yaml"
    path.write_text(MIX)
    assert main(["translate", "--strict", "-f", str(path)]) == 3
    out = capsys.readouterr()
    assert out.err.splitlines()[-1] == f"gpu2dra: {SUMMARY}"
    assert "resourceClaimTemplateName" in out.out  # written all the same
    # Without --strict: exit 0 and no summary.
    assert main(["translate", "-f", str(path)]) == 0
    assert "translated," not in capsys.readouterr().err


def test_strict_exits_0_when_nothing_asking_for_gpus_is_left(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text(MIX.split("---\n")[1] + "---\n" + MIX.split("---\n")[0])
    assert main(["translate", "--strict", "-f", str(path), "-o", "json"]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == (
        "gpu2dra: 2 documents: 1 translated, 0 left, 1 unchanged"
    )


def test_a_stream_cut_into_pieces_counts_the_same(policy: Policy, catalog: Catalog) -> None:
    def count(jobs: int) -> str:
        rendered = translate_text(
            MIX,
            policy,
            catalog,
            namespace="ns",
            mode="enabled",
            output="yaml",
            jobs=jobs,
            min_bytes=0,
            count=True,
        )
        return str(rendered.tally)

    assert count(1) == count(3) == SUMMARY
