"""Karpenter beside the control plane: its v1.15.0 kwok provider, built by
tests/karpenter/build.sh, run as a host process with the admin kubeconfig. It launches Nodes
itself (Node objects, no kubelet) for the pods the scheduler marked Unschedulable; a stand-in
thread here plays their kubelet's one part the tests need: it marks them Ready.

What is applied: Karpenter's CRDs from its module, a KWOKNodeClass (Ready), and a NodePool
`gpu` at zero nodes whose instance types (INSTANCE_TYPES, given with
--instance-types-file-path) offer nvidia.com/gpu as the device plugin would.

With dra=True it runs `karpenter-dra` instead (tests/karpenter/kwokdra/: the same provider whose
GPU instance types predict their gpu.nvidia.com devices, from DEVICES_FILE), and a second
stand-in, SlicePublisher, plays the DRA driver's kubelet plugin: it publishes each GPU Node's
ResourceSlice."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from tests.support.cluster import (
    RESOURCE_GROUP,
    RESOURCE_VERSION,
    gpu_devices,
    gpu_resource_slice,
)
from tests.support.controlplane import ControlPlane, find_bin_dir
from tests.support.ports import free_port
from tests.support.tools import missing

Obj = dict[str, Any]
VERSION = "v1.15.0"
BUILD_HINT = "tests/karpenter/build.sh"
GROUP = "karpenter.sh"
# The label Karpenter's kwok provider puts on the Nodes it creates.
KWOK_NODE = "kwok.x-k8s.io/node=fake"
NODEPOOL = "gpu"
# Karpenter's log line and event message for a pod with claims under --ignore-dra-requests
# (its default): pkg/controllers/provisioning/scheduling/scheduler.go.
SKIPPED_DRA = "skipping pod with Dynamic Resource Allocation requirements"


def _offering(price: float) -> Obj:
    requirements = [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["test-zone-a"]},
    ]
    return {"Price": price, "Available": True, "Requirements": requirements}


def instance_type(name: str, price: float, **resources: str) -> Obj:
    """One entry of the kwok provider's instance-type file (kwok/cloudprovider/helpers.go
    InstanceTypeOptions): one on-demand offering in test-zone-a."""
    return {
        "name": name,
        "offerings": [_offering(price)],
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": resources,
    }


# GPU instance types as a cloud lists them: the device plugin's nvidia.com/gpu among the
# resources, nothing for DRA (no provider publishes ResourceSlice templates for gpu.nvidia.com).
INSTANCE_TYPES = [
    instance_type("gpu-1x", 1.0, cpu="8", memory="64Gi", **{"nvidia.com/gpu": "1"}),
    instance_type("gpu-8x", 8.0, cpu="96", memory="768Gi", **{"nvidia.com/gpu": "8"}),
]


def gpu_count(instance: Obj) -> int:
    return int(instance["resources"].get("nvidia.com/gpu", "0"))


def predicted_devices() -> dict[str, list[Obj]]:
    """What karpenter-dra's KWOK_DRA_DEVICES_FILE holds: for each GPU instance type, the
    devices NVIDIA's driver publishes on a node with that many A100-SXM4-40GB GPUs, as
    tests/support/cluster.py's gpu_devices makes them, less the UUID (known only once the node
    runs)."""
    predicted = {}
    for instance in INSTANCE_TYPES:
        if gpus := gpu_count(instance):
            devices = gpu_devices("template", gpus=gpus)
            for device in devices:
                device["attributes"].pop("uuid", None)
            predicted[instance["name"]] = devices
    return predicted


def node_class() -> Obj:
    return {
        "apiVersion": "karpenter.kwok.sh/v1alpha1",
        "kind": "KWOKNodeClass",
        "metadata": {"name": "default"},
    }


def node_pool() -> Obj:
    """A NodePool over INSTANCE_TYPES, at zero nodes until a pod needs one; nodes it no longer
    needs are not consolidated while a test runs."""
    names = [t["name"] for t in INSTANCE_TYPES]
    requirements = [
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": names},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]},
    ]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": NODEPOOL},
        "spec": {
            "template": {
                "spec": {
                    "requirements": requirements,
                    "nodeClassRef": {
                        "group": "karpenter.kwok.sh",
                        "kind": "KWOKNodeClass",
                        "name": "default",
                    },
                    "expireAfter": "Never",
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "Never"},
            "limits": {"nvidia.com/gpu": "64"},
        },
    }


class NodeReadier:
    """The kubelet's part for the Nodes Karpenter's kwok provider creates: each is marked
    Ready (and its not-ready taint, should anything add it, lifted), and kept Ready."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kwok-node-readier", daemon=True)
        self.errors: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                for node in self.core.list_node(label_selector=KWOK_NODE).items:
                    self._ready(node)
            except ApiException as error:
                if error.status != 404:
                    self.errors.append(f"{error.status}: {error.reason}")
            except Exception as error:  # the API server restarting, a closed pool
                self.errors.append(repr(error))

    def _ready(self, node: client.V1Node) -> None:
        conditions = node.status.conditions or []
        ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
        if not ready:
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            condition = {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kwok stand-in of tests/support/karpenter.py",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
            self.core.patch_node_status(node.metadata.name, {"status": {"conditions": [condition]}})
        taints = node.spec.taints or []
        kept = [t for t in taints if t.key != "node.kubernetes.io/not-ready"]
        if len(kept) != len(taints):
            body = [{"key": t.key, "value": t.value, "effect": t.effect} for t in kept]
            self.core.patch_node(node.metadata.name, {"spec": {"taints": body}})


class SlicePublisher:
    """The DRA driver's kubelet plugin for the Nodes Karpenter's kwok provider creates: each
    Node of a GPU instance type gets the gpu.nvidia.com ResourceSlice of its GPUs (gpu_devices,
    owned by the Node), once; clear() deletes the slices it made."""

    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.gpus = {t["name"]: gpu_count(t) for t in INSTANCE_TYPES if gpu_count(t)}
        self.published: dict[str, str] = {}  # node name -> slice name
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kwok-slice-publisher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            try:
                for node in self.core.list_node(label_selector=KWOK_NODE).items:
                    self._publish(node)
            except Exception as error:  # the API server restarting, a closed pool
                self.errors.append(repr(error))

    def _publish(self, node: client.V1Node) -> None:
        name = node.metadata.name
        gpus = self.gpus.get((node.metadata.labels or {}).get("node.kubernetes.io/instance-type"))
        if not gpus or name in self.published:
            return
        owner = {"metadata": {"name": name, "uid": node.metadata.uid}}
        body = gpu_resource_slice(name, gpu_devices(name, gpus=gpus), owner=owner)
        created = self.custom.create_cluster_custom_object(
            RESOURCE_GROUP, RESOURCE_VERSION, "resourceslices", body
        )
        self.published[name] = created["metadata"]["name"]

    def clear(self) -> None:
        for slice_name in self.published.values():
            with contextlib.suppress(ApiException):
                self.custom.delete_cluster_custom_object(
                    RESOURCE_GROUP, RESOURCE_VERSION, "resourceslices", slice_name
                )
        self.published.clear()


class Karpenter:
    """Karpenter's kwok provider as a host process of the test's control plane, logging to
    the control plane's log directory (karpenter.log), so a failed run keeps it."""

    def __init__(
        self, plane: ControlPlane, api: client.ApiClient, work_dir: Path, *, dra: bool = False
    ) -> None:
        self.plane, self.api, self.work_dir = plane, api, work_dir
        self.binary = find_bin_dir() / "karpenter" / ("karpenter-dra" if dra else "karpenter")
        self.crds = self.binary.parent / "crds"
        # karpenter-dra's predicted devices, and the stand-in that publishes the real ones.
        self.devices = work_dir / "devices.json"
        self.publisher = SlicePublisher(api) if dra else None
        self.log = plane.log_dir / "karpenter.log"
        self.instance_types = work_dir / "instance-types.json"
        self.health_port, self.metrics_port = free_port(), free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.readier = NodeReadier(api)
        self.custom = client.CustomObjectsApi(api)

    def install(self) -> None:
        """The CRDs, a Ready KWOKNodeClass and the GPU NodePool."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.instance_types.write_text(json.dumps(INSTANCE_TYPES, indent=2))
        self.devices.write_text(json.dumps(predicted_devices(), indent=2))
        self.plane.kubectl("apply", "--server-side", "-f", str(self.crds))
        self.plane.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "-f", str(self.crds)
        )
        self.plane.kubectl("apply", "-f", "-", stdin=node_class())
        # No controller of the kwok provider judges a KWOKNodeClass; Karpenter launches
        # nothing for a NodePool whose class is not Ready.
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = {"type": "Ready", "status": "True", "reason": "Ready", "message": ""}
        self.custom.patch_cluster_custom_object_status(
            "karpenter.kwok.sh",
            "v1alpha1",
            "kwoknodeclasses",
            "default",
            {"status": {"conditions": [{**ready, "lastTransitionTime": now}]}},
        )
        self.plane.kubectl("apply", "-f", "-", stdin=node_pool())

    def start(self, *args: str) -> None:
        """Karpenter running with `args` (e.g. --ignore-dra-requests=false), no leader
        election, ready."""
        self.stop()
        command = [
            str(self.binary),
            "--disable-leader-election=true",
            f"--health-probe-port={self.health_port}",
            f"--metrics-port={self.metrics_port}",
            f"--instance-types-file-path={self.instance_types}",
            *args,
        ]
        env = {**os.environ, "KUBECONFIG": str(self.plane.kubeconfig)}
        if self.publisher is not None:
            env["KWOK_DRA_DEVICES_FILE"] = str(self.devices)
        with self.log.open("ab") as log:
            log.write(f"--- {' '.join(command)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                command, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
            )
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"Karpenter exited: {self.log_text()[-3000:]}")
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(url, timeout=2) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.3)
        raise AssertionError(f"Karpenter not ready in {timeout}s: {self.log_text()[-3000:]}")

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def log_lines(self, message: str) -> list[Obj]:
        """Karpenter's JSON log lines whose message starts with `message`."""
        found = []
        for line in self.log_text().splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict) and str(entry.get("message", "")).startswith(message):
                    found.append(entry)
        return found

    def nodeclaims(self) -> list[Obj]:
        listed = self.custom.list_cluster_custom_object(GROUP, "v1", "nodeclaims")
        items: list[Obj] = listed["items"]
        return items

    def remove(self, *plurals: str) -> None:
        """Every NodeClaim and every Node Karpenter made (and the NodePool when
        plurals says so), at once: their finalizers dropped (Karpenter, stopped first, would
        drain pods no kubelet ends), so no GPU Node outlives a test for other pods to land on."""
        core = client.CoreV1Api(self.api)
        for plural in plurals or ("nodeclaims",):
            for item in self.custom.list_cluster_custom_object(GROUP, "v1", plural)["items"]:
                name = item["metadata"]["name"]
                with contextlib.suppress(ApiException):
                    self.custom.delete_cluster_custom_object(GROUP, "v1", plural, name)
                with contextlib.suppress(ApiException):
                    self.custom.patch_cluster_custom_object(
                        GROUP, "v1", plural, name, {"metadata": {"finalizers": None}}
                    )
        for node in core.list_node(label_selector=KWOK_NODE).items:
            name = node.metadata.name
            with contextlib.suppress(ApiException):
                core.delete_node(name)
            with contextlib.suppress(ApiException):
                core.patch_node(name, {"metadata": {"finalizers": None}})
        if self.publisher is not None:
            self.publisher.clear()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None


def running_karpenter(
    plane: ControlPlane, api: client.ApiClient, work_dir: Path, *, dra: bool = False
) -> Iterator[Karpenter]:
    """Karpenter installed and its Nodes' stand-ins running (start() is the test's: flags
    differ); afterwards stopped, its NodeClaims, Nodes, slices and NodePool removed. dra:
    karpenter-dra, and the slices of its GPU Nodes published."""
    bin_dir = find_bin_dir()
    binary = "karpenter-dra" if dra else "karpenter"
    if not os.access(bin_dir / "karpenter" / binary, os.X_OK):
        where = f"karpenter/{binary} missing in {bin_dir}"
        if shutil.which("go") is not None:
            pytest.fail(f"{where}: run `bash {BUILD_HINT}`", pytrace=False)
        missing(f"Go is not installed to build Karpenter: {where}")
    karpenter = Karpenter(plane, api, work_dir, dra=dra)
    karpenter.install()
    karpenter.readier.start()
    if karpenter.publisher is not None:
        karpenter.publisher.start()
    try:
        yield karpenter
    finally:
        karpenter.stop()
        karpenter.readier.stop()
        if karpenter.publisher is not None:
            karpenter.publisher.stop()
        karpenter.remove("nodepools", "nodeclaims")
