"""End-to-end tests against a real Kubernetes control plane (see tests/support/controlplane.py).

Every test runs against the newest release tests/k8s builds; a test or module marked
`every_release` (pytestmark = pytest.mark.every_release) runs against each one, newest first.
The release is in the test id (test_x[v1.34]), and the `release` fixture names it. One control
plane runs at a time: pytest groups the tests by release.

Build the binaries first with tests/k8s/build.sh. The tests skip only when Go is not
installed (and CI is not "true"); with Go, a missing binary is a failure that says to build.
When a test fails, tests/e2e/logs/<release>/ gets the control-plane logs and each gpu2dra
webhook's log (after the processes stopped, so they are complete), the real node's when it ran,
and the failed test's namespace and the cluster's DRA objects as YAML (tests/support/
failure_logs.py).
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.support.cluster import (
    create_namespace,
    delete_namespace,
    delete_node,
    publish_elsewhere,
    unpublish_elsewhere,
    wait_for_default_service_account,
)
from tests.support.controlplane import (
    RELEASE_BINARIES,
    ControlPlane,
    find_bin_dir,
    missing_binaries,
    releases,
)
from tests.support.failure_logs import LOG_COPY_DIR, copy_logs, dump_namespace, failure_dir
from tests.support.tools import require_tools
from tests.support.webhook import WEBHOOK_LOG, Webhook, running_webhook

RELEASES = releases()
_failed = pytest.StashKey[bool]()
_copied_logs = pytest.StashKey[Path]()
_reports = pytest.StashKey[dict[str, pytest.TestReport]]()
_webhook_logs = pytest.StashKey[dict[str, dict[str, Path]]]()


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test that needs a control plane gets the newest release, or every release when
    it is marked every_release; session scope, so each release's plane starts once."""
    if "release" not in metafunc.fixturenames:
        return
    every = metafunc.definition.get_closest_marker("every_release") is not None
    chosen = RELEASES if every else RELEASES[:1]
    metafunc.parametrize("release", chosen, indirect=True, scope="session")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    item.stash.setdefault(_reports, {})[report.when] = report
    if report.failed:
        item.session.stash[_failed] = True
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    logs = config.stash.get(_copied_logs, None)
    if logs is not None:
        terminalreporter.write_line(f"control plane and webhook logs copied to {logs}")


@pytest.fixture(scope="session")
def release(request: pytest.FixtureRequest) -> str:
    """The Kubernetes release the test runs against, e.g. "v1.37" (see pytest_generate_tests)."""
    name: str = request.param
    return name


def _missing_release_tools(bin_dir: Path, release: str) -> list[str]:
    """What a control plane of `release` needs from build.sh that bin_dir lacks, as paths
    relative to bin_dir ("v1.34/etcd", "helm")."""
    missing = [f"{release}/{n}" for n in missing_binaries(bin_dir / release, RELEASE_BINARIES)]
    return missing + missing_binaries(bin_dir, ["helm"])


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, release: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    bin_dir = find_bin_dir()
    require_tools(bin_dir, _missing_release_tools(bin_dir, release))
    plane = ControlPlane(bin_dir / release, tmp_path_factory.mktemp(f"control-plane-{release}"))
    try:
        plane.start()
        yield plane
    except BaseException:
        request.session.stash[_failed] = True
        raise
    finally:
        plane.stop()
        if request.session.stash.get(_failed, False):
            webhook_logs = request.session.stash.get(_webhook_logs, {}).get(release, {})
            dest = failure_dir(request.config, release)
            if copy_logs(plane.log_dir, webhook_logs, dest):
                request.config.stash[_copied_logs] = LOG_COPY_DIR


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """kubernetes.client.ApiClient with the admin kubeconfig."""
    api = control_plane.api_client()
    yield api
    api.close()


@pytest.fixture
def namespace(
    request: pytest.FixtureRequest,
    release: str,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
) -> Iterator[str]:
    """A fresh namespace whose default ServiceAccount exists (so pods can be created); what
    it holds is kept when the test fails."""
    yield from _fresh_namespace(request, release, control_plane, api_client)


@pytest.fixture
def second_namespace(
    request: pytest.FixtureRequest,
    release: str,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
) -> Iterator[str]:
    """Another fresh namespace, for tests that compare two namespace modes."""
    yield from _fresh_namespace(request, release, control_plane, api_client)


def _fresh_namespace(
    request: pytest.FixtureRequest, release: str, plane: ControlPlane, api: client.ApiClient
) -> Iterator[str]:
    name = create_namespace(api)
    wait_for_default_service_account(api, name)
    yield name
    if any(r.failed for r in request.node.stash.get(_reports, {}).values()):
        test = request.node.name.replace("/", "_")
        dump_namespace(plane, name, failure_dir(request.config, release, f"{test}-{name}"))
    delete_namespace(api, name)


@pytest.fixture(scope="module")
def webhook(
    request: pytest.FixtureRequest,
    release: str,
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    """A real `gpu2dra serve`, registered through the chart's webhook configurations; its log
    is copied with the control plane's when a test fails. nvidia.com/gpu's `inTree` is the
    module's IN_TREE, `translate` where it has none (tests/support/webhook.py in_tree_policy)."""
    work_dir = tmp_path_factory.mktemp("gpu2dra")
    module = request.module.__name__.rsplit(".", 1)[-1]
    logs = request.session.stash.setdefault(_webhook_logs, {}).setdefault(release, {})
    logs[module] = work_dir / WEBHOOK_LOG
    in_tree = getattr(request.module, "IN_TREE", "translate")
    yield from running_webhook(control_plane, api_client, work_dir, in_tree)


@pytest.fixture
def no_devices_elsewhere(api_client: client.ApiClient, webhook: Webhook) -> Iterator[None]:
    """No device published but this test's own: the one every e2e cluster publishes on a node
    that does not exist (tests/support/cluster.py's ELSEWHERE) is put back afterwards."""
    unpublish_elsewhere(api_client)
    yield
    publish_elsewhere(api_client)


@pytest.fixture
def gpu_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    """Nodes this test creates (add_gpu_node); removed afterwards so tests share no devices."""
    names: list[str] = []
    yield names
    for name in names:
        delete_node(api_client, name)
