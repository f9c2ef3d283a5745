"""A rolling restart of two replicas behind a Service, with the API server as the only client.

There is no kube-proxy: the API server (with --enable-aggregator-routing) reaches a webhook
Service through its EndpointSlices, picking a ready endpoint at random for each call. The
test plays the EndpointSlice controller: a replica's endpoint is removed when its /readyz
turns 503 and added back when it answers 200.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

import orjson
import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.support.cluster import create_nvidia_device_classes, gpu_pod, wait_for
from tests.support.controlplane import ControlPlane
from tests.support.webhook import RELEASE_NAMESPACE, Webhook, register, render_chart, unregister

Obj = dict[str, object]
SERVICE = "gpu2dra"  # the chart's fullname for the release "gpu2dra"
DRAIN = ("--drain-seconds", "2")


def host_ip() -> str:
    """This machine's address on its default route: Endpoint addresses may not be loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("192.0.2.1", 9))  # UDP: nothing is sent
        address: str = sock.getsockname()[0]
    assert not address.startswith("127."), "no non-loopback address to publish"
    return address


class EndpointSlices(threading.Thread):
    """One EndpointSlice per replica (their ports differ), holding it while /readyz is 200."""

    def __init__(self, api: client.ApiClient, replicas: list[Webhook], address: str) -> None:
        super().__init__(name="endpointslices")
        self.discovery = client.DiscoveryV1Api(api)
        self.replicas, self.address = replicas, address
        self.stop = threading.Event()
        self.published: list[bool | None] = [None] * len(replicas)

    def slice(self, i: int, ready: bool) -> Obj:
        endpoints = [{"addresses": [self.address], "conditions": {"ready": True}}]
        return {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-replica{i}",
                "namespace": RELEASE_NAMESPACE,
                "labels": {"kubernetes.io/service-name": SERVICE},
            },
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": self.replicas[i].port, "protocol": "TCP"}],
            "endpoints": endpoints if ready else [],
        }

    def publish(self, i: int, ready: bool) -> None:
        body = self.slice(i, ready)
        try:
            self.discovery.create_namespaced_endpoint_slice(RELEASE_NAMESPACE, body)
        except ApiException as err:
            if err.status != 409:
                raise
            name = f"{SERVICE}-replica{i}"
            self.discovery.replace_namespaced_endpoint_slice(name, RELEASE_NAMESPACE, body)
        self.published[i] = ready

    def run(self) -> None:
        while not self.stop.is_set():
            for i, replica in enumerate(self.replicas):
                ready = _ready(replica)
                if ready != self.published[i]:
                    self.publish(i, ready)
            self.stop.wait(0.05)


def _ready(replica: Webhook) -> bool:
    try:
        return replica.process is not None and replica.get("/readyz")[0] == 200
    except OSError:
        return False


def _answered(replica: Webhook) -> float:
    """Pods this replica process has translated (its counters start at zero)."""
    status, text = replica.get("/metrics")
    prefix = 'gpu2dra_requests_total{endpoint="mutate",result="patched"}'
    lines = [line for line in text.decode().splitlines() if line.startswith(prefix)]
    return float(lines[0].rsplit(" ", 1)[1]) if status == 200 and lines else 0.0


def _answered_over(replica: Webhook, count: float) -> Callable[[], bool]:
    return lambda: _answered(replica) > count


def register_by_service(api: client.ApiClient, helm: Path, ca_bundle: str) -> None:
    """The chart's webhook configurations (by Service, failurePolicy Fail: a call that fails
    fails the create) and its Service without a selector: the test owns the endpoints."""
    docs = render_chart(
        helm,
        "tls.mode=secret",
        "tls.secretName=unused",
        f"tls.caBundle={ca_bundle}",
        "webhook.mutating.failurePolicy=Fail",
    )
    core = client.CoreV1Api(api)
    try:
        core.create_namespace({"metadata": {"name": RELEASE_NAMESPACE}})
    except ApiException as err:
        if err.status != 409:
            raise
    (service,) = [d for d in docs if d["kind"] == "Service"]
    assert service["metadata"]["name"] == SERVICE
    spec = {k: v for k, v in service["spec"].items() if k != "selector"}
    core.create_namespaced_service(RELEASE_NAMESPACE, {**service, "spec": spec})
    register(api, docs)


def test_rolling_restart_behind_a_service_fails_no_pod_create(
    control_plane: ControlPlane,
    api_client: client.ApiClient,
    namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    create_nvidia_device_classes(api_client)
    helm = control_plane.helm
    replicas = [
        Webhook(tmp_path_factory.mktemp(f"replica{i}"), control_plane.kubeconfig, helm)
        for i in range(2)
    ]
    replicas[1].certs = replicas[0].certs  # one CA in the webhook configurations
    for replica in replicas:
        replica.start(*DRAIN)
    register_by_service(api_client, helm, replicas[0].ca_bundle)
    slices = EndpointSlices(api_client, replicas, host_ip())
    slices.start()
    core = client.CoreV1Api(api_client)
    try:
        for replica in replicas:
            replica.set_mode(api_client, namespace, "enabled")
        probed = [_answered(r) for r in replicas]  # set_mode's own probes
        created, failures, stop = [0], [], threading.Event()

        def create_pods() -> None:
            while not stop.is_set():
                pod = gpu_pod(f"p{uuid.uuid4().hex[:10]}", {"nvidia.com/gpu": "1"})
                try:
                    resp = core.create_namespaced_pod(namespace, pod, _preload_content=False)
                    stored = orjson.loads(resp.data)
                except ApiException as err:
                    failures.append(f"{err.status} {err.body!r}"[:400])
                    continue
                created[0] += 1
                if "resourceClaims" not in stored["spec"]:
                    failures.append(f"{stored['metadata']['name']} not translated")

        loaders = [threading.Thread(target=create_pods) for _ in range(4)]
        for t in loaders:
            t.start()
        started = time.monotonic()
        try:
            for replica, before in zip(replicas, probed, strict=True):
                wait_for(_answered_over(replica, before), 60, "pods at each replica")
            # One at a time, as a Deployment's rolling update does. The API server resolves
            # the Service when it dials and then keeps the connection: a restarted replica
            # gets calls once the other one stops, so the second restart proves the first.
            for i, replica in enumerate(replicas):
                assert replica.stop() == 0
                replica.start(*DRAIN)
                wait_for(partial(slices.published.__getitem__, i), 30, "the endpoint back")
            wait_for(_answered_over(replicas[0], 0), 60, "calls at the restarted replica")
            enough = created[0] + 50
            wait_for(lambda: created[0] > enough, 60, "pods created after the restarts")
        finally:
            stop.set()
            for t in loaders:
                t.join()
        took = time.monotonic() - started
        print(f"rolling restart: {created[0]} pods created in {took:.1f}s, {len(failures)} failed")
        assert failures == []
        assert created[0] >= 100, f"only {created[0]} pods created"
    finally:
        slices.stop.set()
        slices.join()
        unregister(api_client)
        core.delete_namespaced_service(SERVICE, RELEASE_NAMESPACE)
        client.DiscoveryV1Api(api_client).delete_collection_namespaced_endpoint_slice(
            RELEASE_NAMESPACE, label_selector=f"kubernetes.io/service-name={SERVICE}"
        )
        for replica in replicas:
            replica.stop()
