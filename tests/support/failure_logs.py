"""What a failed end-to-end run leaves in tests/e2e/logs/<release>/, to explain the failure
after the processes are gone: every process's log (the control plane's, each gpu2dra
webhook's, the real node's: kubelet, containerd, the DRA plugin and the pods' own logs) and,
for each failed test, its namespace and the cluster's DRA objects as YAML."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.controlplane import ControlPlane

LOG_COPY_DIR = Path(__file__).parents[1] / "e2e" / "logs"
_cleared = pytest.StashKey[bool]()
# What a failed test's namespace holds, and what the cluster holds for DRA, as kubectl names it.
NAMESPACED = "pods,events,resourceclaims,resourceclaimtemplates,replicasets,deployments,jobs"
CLUSTER = "resourceslices,deviceclasses,nodes"


def failure_dir(config: pytest.Config, *parts: str) -> Path:
    """tests/e2e/logs/<parts...>; the first call of a run removes an earlier run's files, so
    what is there comes from one run."""
    if not config.stash.get(_cleared, False):
        shutil.rmtree(LOG_COPY_DIR, ignore_errors=True)
        config.stash[_cleared] = True
    path = LOG_COPY_DIR.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def copy_logs(plane_logs: Path, webhook_logs: Mapping[str, Path], dest: Path) -> bool:
    """Copy the control-plane logs plus webhook-<module>.log for each gpu2dra webhook (one
    per test module) into `dest`, beside what is there; False when there is nothing to copy."""
    if not plane_logs.is_dir():
        return False
    shutil.copytree(plane_logs, dest, dirs_exist_ok=True)
    for module, log in webhook_logs.items():
        if log.is_file():
            shutil.copyfile(log, dest / f"webhook-{module}.log")
    return True


def copy_node_logs(logs: Path, dest: Path) -> None:
    """The real node's process logs (kubelet, containerd, the plugin), or its pods' logs."""
    if logs.is_dir():
        shutil.copytree(logs, dest, dirs_exist_ok=True, symlinks=False)


def dump_namespace(plane: ControlPlane, namespace: str, dest: Path) -> None:
    """`kubectl get -o yaml` of the namespace's pods, events, claims and their owners, and of
    the cluster's ResourceSlices, DeviceClasses and Nodes, into `dest`: what the scheduler,
    the controllers and the kubelet decided, as they recorded it."""
    dest.mkdir(parents=True, exist_ok=True)
    for file, args in (
        ("namespace.yaml", ("get", NAMESPACED, "-n", namespace, "-o", "yaml")),
        ("cluster.yaml", ("get", CLUSTER, "-o", "yaml")),
        ("events.txt", ("get", "events", "-n", namespace, "--sort-by=.lastTimestamp")),
    ):
        done = plane.run_kubectl(*args)
        errors = "".join(f"# {line}\n" for line in done.stderr.splitlines())
        (dest / file).write_text(done.stdout + errors)
