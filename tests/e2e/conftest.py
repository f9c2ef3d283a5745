"""End-to-end tests against a real Kubernetes control plane (see controlplane.py).

Build the binaries first with tests/k8s/build.sh. Without them the tests are skipped, except
under CI=true, where that is an error. When a test fails, the control-plane logs are copied
to tests/e2e/logs/ (after the processes stopped, so they are complete).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.controlplane import BUILD_HINT, ControlPlane, find_bin_dir, missing_binaries
from tests.e2e.fixtures import (
    create_namespace,
    delete_namespace,
    delete_node,
    wait_for_default_service_account,
)
from tests.e2e.webhook import Webhook, running_webhook

LOG_COPY_DIR = Path(__file__).parent / "logs"
_failed = pytest.StashKey[bool]()
_copied_logs = pytest.StashKey[Path]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        item.session.stash[_failed] = True
    return report


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    logs = config.stash.get(_copied_logs, None)
    if logs is not None:
        terminalreporter.write_line(f"control plane logs copied to {logs}")


@pytest.fixture(scope="session")
def control_plane(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ControlPlane]:
    bin_dir = find_bin_dir()
    missing = missing_binaries(bin_dir)
    if missing:
        message = (
            f"end-to-end tests need the control plane binaries: run {BUILD_HINT}"
            f" (missing in {bin_dir}: {', '.join(missing)})"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)

    plane = ControlPlane(bin_dir, tmp_path_factory.mktemp("control-plane"))
    try:
        plane.start()
        yield plane
    except BaseException:
        request.session.stash[_failed] = True
        raise
    finally:
        plane.stop()
        if request.session.stash.get(_failed, False):
            _copy_logs(plane, request.config)


def _copy_logs(plane: ControlPlane, config: pytest.Config) -> None:
    if not plane.log_dir.is_dir():
        return
    shutil.rmtree(LOG_COPY_DIR, ignore_errors=True)
    shutil.copytree(plane.log_dir, LOG_COPY_DIR)
    config.stash[_copied_logs] = LOG_COPY_DIR


@pytest.fixture(scope="session")
def api_client(control_plane: ControlPlane) -> Iterator[client.ApiClient]:
    """kubernetes.client.ApiClient with the admin kubeconfig."""
    api = control_plane.api_client()
    yield api
    api.close()


@pytest.fixture
def namespace(api_client: client.ApiClient) -> Iterator[str]:
    """A fresh namespace whose default ServiceAccount exists (so pods can be created)."""
    name = create_namespace(api_client)
    wait_for_default_service_account(api_client, name)
    yield name
    delete_namespace(api_client, name)


@pytest.fixture(scope="module")
def webhook(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Webhook]:
    """A real `gpu2dra serve`, registered through the chart's webhook configurations."""
    yield from running_webhook(control_plane, api_client, tmp_path_factory.mktemp("gpu2dra"))


@pytest.fixture
def gpu_nodes(api_client: client.ApiClient) -> Iterator[list[str]]:
    """Nodes this test creates (add_gpu_node); removed afterwards so tests share no devices."""
    names: list[str] = []
    yield names
    for name in names:
        delete_node(api_client, name)
