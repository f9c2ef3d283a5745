"""The real node (tests/node) joined to a test's control plane, for the modules that run pods:
started once per module, stopped after it, its logs copied when a test of it failed."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.node.node import BUILD_HINT, RealNode, missing_node_tools
from tests.support.controlplane import REAL_NODE_NAME, ControlPlane, find_bin_dir
from tests.support.failure_logs import copy_node_logs, failure_dir
from tests.support.tools import missing


def node_release(api_client: client.ApiClient) -> str:
    """The control plane's release, e.g. "v1.34": the kubelet that may join it."""
    major, minor, *_ = client.VersionApi(api_client).get_code().git_version.split(".")
    return f"{major}.{minor}"


def running_node(
    request: pytest.FixtureRequest,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    work_dir: Path,
    devices: Sequence[dict[str, Any]],
    *,
    pod_network: bool = False,
    consumable_shares: str = "",
    daemonsets: bool = False,
) -> Iterator[RealNode]:
    """containerd + kubelet + the fake NVIDIA DRA plugin, joined as REAL_NODE_NAME (with
    RealNode's `pod_network`, `consumable_shares` and `daemonsets`); fails in CI (skips
    elsewhere, saying why) where it cannot run."""
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        missing("a real node needs Linux and root (mounts, cgroups, network namespaces)")
    bin_dir = find_bin_dir() / "node"
    release = node_release(api_client)
    absent = missing_node_tools(bin_dir, release)
    if absent:
        message = f"{', '.join(absent)} missing in {bin_dir}: run `bash {BUILD_HINT}`"
        if shutil.which("go"):
            pytest.fail(message, pytrace=False)
        missing(f"Go is not installed to build the node: {message}")
    failed_before = request.session.testsfailed
    node = RealNode(
        bin_dir,
        work_dir,
        control_plane,
        name=REAL_NODE_NAME,
        release=release,
        devices=devices,
        api=api_client,
        pod_network=pod_network,
        consumable_shares=consumable_shares,
        daemonsets=daemonsets,
    )
    started = False
    try:
        node.start()
        started = True
        yield node
    finally:
        failed = not started or request.session.testsfailed > failed_before
        module = request.module.__name__.rsplit(".", 1)[-1]
        dest = failure_dir(request.config, release, f"node-{module}") if failed else None
        if dest is not None:  # the pods' logs go with the pods, which stop() deletes
            copy_node_logs(node.pod_logs, dest / "pods")
        node.stop()
        if dest is not None:
            copy_node_logs(node.log_dir, dest)
