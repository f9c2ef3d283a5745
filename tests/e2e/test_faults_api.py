"""API server faults the webhook must outlive, each against the real control plane: hanging
at start, unreachable mid-run, a watch too old to resume, and onError: deny; and a SIGTERM
with a request in flight."""

from __future__ import annotations

import logging
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from app.watch.stores import Store
from app.webhook.metrics import Metrics
from tests.e2e.probes import metric, review
from tests.support.cluster import create_nvidia_device_classes, gpu_pod, label, wait_for
from tests.support.controlplane import ControlPlane
from tests.support.webhook import Webhook, register, unregister

# Tight bounds, so that "within the deadline" is measured, not assumed (timeoutSeconds is 5).
API_TIMEOUT, DEADLINE = 1.0, 2.0
BOUNDS = ("--api-timeout", str(API_TIMEOUT), "--deadline", str(DEADLINE))
SLACK = 1.0  # the machine is shared: a second for scheduling, still well under 5 s
CACHES = ("namespaces", "deviceclasses", "resourceclaimtemplates", "resourcequotas")


def synced(hook: Webhook) -> float:
    return sum(metric(hook, f'gpu2dra_cache_synced{{cache="{c}"}}') for c in CACHES)


def timed_post(hook: Webhook, path: str, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    status, answer = hook.post(path, body)
    took = time.monotonic() - started
    assert status == 200
    print(f"{path} answered in {took * 1000:.0f} ms")
    return answer["response"], took


@pytest.fixture
def hook(
    control_plane: ControlPlane, api_client: client.ApiClient, tmp_path: Path
) -> Iterator[Webhook]:
    """A webhook of this test's own (not registered), stopped afterwards."""
    create_nvidia_device_classes(api_client)
    webhook = Webhook(tmp_path, control_plane.kubeconfig, control_plane.helm)
    yield webhook
    assert webhook.stop() in (0, None)


@contextmanager
def paused(control_plane: ControlPlane) -> Iterator[None]:
    """kube-apiserver SIGSTOPped: connections are accepted by the kernel, never answered."""
    apiserver = control_plane.process("kube-apiserver")
    apiserver.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        apiserver.send_signal(signal.SIGCONT)


def test_hanging_api_server_at_start(
    hook: Webhook, control_plane: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    with paused(control_plane):
        hook.start(*BOUNDS, wait_for="/healthz")
        assert hook.get("/readyz")[0] == 503, "not ready before the caches have synced"
        pod = review(namespace, gpu_pod("p", {"nvidia.com/gpu": 1}))
        response, took = timed_post(hook, "/mutate", pod)
        assert took < DEADLINE + SLACK
        assert response["allowed"] is True and "patch" not in response
        assert response["warnings"] == [
            "gpu2dra has not synced its caches yet; pod admitted unchanged"
        ]
        assert synced(hook) == 0
        assert hook.get("/healthz")[0] == 200, "alive all along"
    wait_for(lambda: hook.get("/readyz")[0] == 200, 60, "ready once the API server answers")
    assert synced(hook) == len(CACHES)
    hook.set_mode(api_client, namespace, "enabled")  # and translating again


def test_unreachable_api_server_mid_run(
    hook: Webhook, control_plane: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    hook.start(*BOUNDS)
    hook.set_mode(api_client, namespace, "enabled")
    control_plane.kill_apiserver()
    try:
        # Every watch breaks: the gauges drop, readiness stays (the caches hold the last state).
        wait_for(lambda: synced(hook) == 0, 30, "the caches to report they are not synced")
        assert hook.get("/readyz")[0] == 200
        for count in (6, 7):  # shapes whose template does not exist: the API is needed
            pod = review(namespace, gpu_pod("p", {"nvidia.com/gpu": count}))
            response, took = timed_post(hook, "/mutate", pod)
            assert took < DEADLINE + SLACK
            assert response["allowed"] is True and "patch" not in response
            (warning,) = response["warnings"]
            assert warning.startswith("gpu2dra could not create ResourceClaimTemplates")
        assert hook.get("/healthz")[0] == 200
    finally:
        control_plane.start_apiserver()
    wait_for(lambda: synced(hook) == len(CACHES), 60, "the caches to sync again")
    response, _ = timed_post(
        hook, "/mutate", review(namespace, gpu_pod("p", {"nvidia.com/gpu": 6}))
    )
    assert "patch" in response, "translating again"


def test_validate_on_a_hanging_api_server_says_not_checked(
    hook: Webhook, control_plane: ControlPlane, namespace: str
) -> None:
    hook.start(*BOUNDS)
    spec = {
        "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "not-in-the-cache"}],
        "containers": [{"name": "c", "image": "busybox"}],
    }
    body = review(namespace, {"metadata": {"name": "p"}, "spec": spec})
    with paused(control_plane):
        response, took = timed_post(hook, "/validate", body)
    assert took < DEADLINE + SLACK
    assert response["allowed"] is True
    (warning,) = response["warnings"]
    assert "could not be checked" in warning and "does not exist" not in warning, warning


def test_on_error_deny_refuses_the_pod_through_the_api_server(
    hook: Webhook, control_plane: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    # The webhook cannot reach the API server (its own kubeconfig points nowhere), but the
    # API server reaches the webhook: every GPU pod in an opted-in namespace is refused.
    kubeconfig = yaml.safe_load(control_plane.kubeconfig.read_text())
    kubeconfig["clusters"][0]["cluster"]["server"] = "https://127.0.0.1:9"
    hook.kubeconfig = hook.work_dir / "dead.kubeconfig"
    hook.kubeconfig.write_text(yaml.safe_dump(kubeconfig))
    deny = hook.work_dir / "deny.yaml"
    deny.write_text("onError: deny\n")
    hook.start(*BOUNDS, "--policy", str(deny), wait_for="/healthz")
    register(api_client, hook.rendered())
    try:
        label(api_client, namespace, "enabled")
        done = control_plane.run_kubectl(
            "create", "-n", namespace, "-f", "-", stdin=gpu_pod("p", {"nvidia.com/gpu": 1})
        )
    finally:
        unregister(api_client)
    assert done.returncode != 0
    assert 'admission webhook "pods.mutate.gpu2dra.io" denied the request' in done.stderr
    assert "gpu2dra has not synced its caches yet" in done.stderr


def test_a_watch_too_old_to_resume_relists(
    api_client: client.ApiClient, caplog: pytest.LogCaptureFixture
) -> None:
    core = client.CoreV1Api(api_client)
    metrics, created = Metrics(), f"meanwhile-{uuid.uuid4().hex[:6]}"

    def list_namespaces(**kwargs: Any) -> Any:
        if kwargs.get("watch") and not watched:
            watched.append(kwargs["resource_version"])
            # Created after the list, then a resume from long before it: the real API server
            # refuses (410 Gone), and only a re-list can see this namespace.
            core.create_namespace({"metadata": {"name": created}})
            kwargs["resource_version"] = "1"
        return core.list_namespace(**kwargs)

    watched: list[str] = []
    store: Store[str, Any] = Store(
        "namespaces",
        list_namespaces,
        key=lambda o: o["metadata"]["name"],
        value=dict,
        metrics=metrics,
        timeout=5,
    )
    stop = threading.Event()
    caplog.set_level(logging.WARNING, "app.watch.stores")
    threading.Thread(target=store.run, args=(stop,), daemon=True).start()
    try:
        wait_for(lambda: store.get(created) is not None, 30, f"{created} in the cache")
    finally:
        stop.set()
        core.delete_namespace(created)  # an event, so that the watch thread sees `stop`
    relists = metrics.registry.get_sample_value(
        "gpu2dra_cache_relists_total", {"cache": "namespaces"}
    )
    assert relists == 2, "the start, then once after the 410"
    assert any("410" in r.getMessage() for r in caplog.records), caplog.text


def test_sigterm_finishes_the_request_in_flight(
    hook: Webhook, control_plane: ControlPlane, api_client: client.ApiClient, namespace: str
) -> None:
    # Long bounds: the request must outlast the drain, held on a paused API server.
    hook.start("--api-timeout", "30", "--deadline", "30", "--drain-seconds", "2")
    hook.set_mode(api_client, namespace, "enabled")
    assert hook.process is not None
    answers: list[tuple[int, dict[str, Any]]] = []
    pod = review(namespace, gpu_pod("p", {"nvidia.com/gpu": 8}))  # a template to create
    creates = 'gpu2dra_api_calls_total{resource="resourceclaimtemplates",verb="create"}'
    with paused(control_plane):
        in_flight = threading.Thread(target=lambda: answers.append(hook.post("/mutate", pod, 60)))
        in_flight.start()
        wait_for(lambda: metric(hook, creates) == 1, 30, "the template create to be in flight")
        hook.process.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        wait_for(lambda: hook.get("/readyz")[0] == 503, 1, "not ready while draining")
        wait_for(lambda: refused(hook.port), 30, "new connections to be refused")
        drained = time.monotonic() - sent
        print(f"drain: connections refused {drained:.2f}s after SIGTERM")
        assert 2 <= drained < 2 + 3, "refused after --drain-seconds, not before"
        assert in_flight.is_alive(), "still held by the paused API server"
    in_flight.join(60)
    ((status, answer),) = answers
    assert status == 200 and "patch" in answer["response"]
    assert hook.process.wait(30) == 0


def refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False
