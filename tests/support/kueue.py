"""Kueue beside the control plane: its v0.17.1 manager, built by tests/kueue/build.sh, run as a
host process with its webhooks registered by URL, as gpu2dra's are; and its ConfigMap and
Deployment as its release installs them, which is what gpu2dra reads of a Kueue (the
Deployment runs no replica: the host process is the manager)."""

from __future__ import annotations

import base64
import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from tests.support.controlplane import REPO_ROOT, ControlPlane, find_bin_dir
from tests.support.ports import free_port
from tests.support.tools import missing, require_tools
from tests.support.webhook import register, unregister

Obj = dict[str, Any]
VERSION = "v0.17.1"
KUEUE_CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
integrations:
  frameworks: [batch/job, pod, deployment]
"""
KUEUE_MAPPED = (
    KUEUE_CONFIG
    + """resources:
  deviceClassMappings:
  - {name: whole-gpus, deviceClassNames: [gpu.nvidia.com]}
  - {name: mig-slices, deviceClassNames: [mig.nvidia.com]}
"""
)
GATE_ON = "--feature-gates=DynamicResourceAllocation=true"
# What a ClusterQueue of the scenarios counts, and the one flavor it has.
FLAVOR = "default-flavor"
# Kueue's webhooks for what the scenarios run: its own kinds and the batch/job, pod and
# deployment integrations (the others' CRDs are not installed, so their paths are not served).
SERVED = {"jobs", "pods", "deployments", "workloads", "clusterqueues", "localqueues"}
SERVED |= {"resourceflavors", "cohorts", "workloadpriorityclasses"}
# The namespaceSelector Kueue's kustomization gives its pod and deployment webhooks.
SYSTEM = {"kube-system", "kueue-system"}


def kueue_objects(config: str, *args: str) -> Obj:
    labels = {"control-plane": "controller-manager"}
    manager = {"name": "manager", "image": f"registry.k8s.io/kueue/kueue:{VERSION}"}
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}},
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
                "data": {"controller_manager_config.yaml": config},
            },
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "kueue-controller-manager", "namespace": "kueue-system"},
                "spec": {
                    "replicas": 0,
                    "selector": {"matchLabels": labels},
                    "template": {
                        "metadata": {"labels": labels},
                        "spec": {"containers": [{**manager, "args": list(args)}]},
                    },
                },
            },
        ],
    }


def remove_kueue(plane: ControlPlane) -> None:
    """Kueue's objects gone at once (the empty namespace stays: deleting it takes a while)."""
    plane.kubectl(
        "delete",
        "-n",
        "kueue-system",
        "deployment/kueue-controller-manager",
        "configmap/kueue-manager-config",
        "--ignore-not-found",
    )


@dataclass(frozen=True)
class Setup:
    """One configuration of a running Kueue: its DRA gate, and whether
    resources.deviceClassMappings maps gpu2dra's classes to the quota names the
    ClusterQueues already count (nvidia.com/gpu, nvidia.com/mig-1g.5gb)."""

    name: str
    gate: bool
    mapped: bool
    # The API server calls mutating webhooks in the order of their configurations' names:
    # Kueue's before gpu2dra's, or after.
    kueue_first: bool = False

    @property
    def config(self) -> str:
        if not self.mapped:
            return KUEUE_CONFIG
        return (
            KUEUE_CONFIG
            + """resources:
  deviceClassMappings:
  - {name: nvidia.com/gpu, deviceClassNames: [gpu.nvidia.com]}
  - {name: nvidia.com/mig-1g.5gb, deviceClassNames: [mig.nvidia.com]}
"""
        )

    @property
    def args(self) -> tuple[str, ...]:
        # The visibility API server is an aggregated API nothing here registers.
        gates = f"VisibilityOnDemand=false,DynamicResourceAllocation={str(self.gate).lower()}"
        return (f"--feature-gates={gates}",)


GATE_OFF = Setup("gate-off", gate=False, mapped=True)
UNMAPPED = Setup("unmapped", gate=True, mapped=False)
MAPPED = Setup("mapped", gate=True, mapped=True)
MAPPED_KUEUE_FIRST = Setup("mapped-kueue-first", gate=True, mapped=True, kueue_first=True)


class KueueManager:
    """Kueue's manager as a host process of the test's control plane: CRDs applied once,
    webhooks registered by URL, restarted for each Setup (Kueue reads its Configuration once,
    at start). It must not see /etc/kueue of the host: it runs in a mount namespace of its
    own, where an overlay on /etc holds the metrics certificate v0.17 insists on."""

    def __init__(self, plane: ControlPlane, api: client.ApiClient, work_dir: Path) -> None:
        self.plane, self.api, self.work_dir = plane, api, work_dir
        self.binary = find_bin_dir() / "kueue" / "kueue"
        self.config_dir = self.binary.parent / "config"
        self.certs = work_dir / "certs"
        self.log = work_dir / "kueue.log"
        self.webhook_port, self.health_port = free_port(), free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.setup: Setup | None = None

    def install(self) -> None:
        """Kueue's CRDs and webhook certificates; the webhooks are registered by start()."""
        self.work_dir.mkdir(parents=True, exist_ok=True)
        names = ["--service", "kueue-webhook-service", "--namespace", "kueue-system"]
        where = ["--ip", "127.0.0.1", "--out", str(self.certs)]
        subprocess.run(
            [sys.executable, "-m", "app", "certs", *names, *where],
            check=True,
            cwd=REPO_ROOT,
            capture_output=True,
        )
        self.plane.kubectl("apply", "--server-side", "-f", str(self.config_dir / "crd"))
        self.plane.kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            str(self.config_dir / "crd"),
        )

    def webhooks(self, setup: Setup | None = None) -> list[Obj]:
        """Kueue's webhook configurations, for the kinds served here, pointing at the host
        process: the namespaceSelectors of its kustomization, its CA; named to sort before
        gpu2dra's or after, as `setup` says."""
        bundle = base64.b64encode((self.certs / "ca.crt").read_bytes()).decode()
        docs = [d for d in yaml.safe_load_all((self.config_dir / "webhooks.yaml").read_text()) if d]
        prefix = "a-kueue" if setup is not None and setup.kueue_first else "kueue"
        for doc in docs:
            doc["metadata"]["name"] = f"{prefix}-{doc['metadata']['name']}"
            kept = []
            for hook in doc["webhooks"]:
                resources = {r for rule in hook["rules"] for r in rule["resources"]}
                if not resources <= SERVED:
                    continue
                path = hook["clientConfig"]["service"]["path"]
                url = f"https://127.0.0.1:{self.webhook_port}{path}"
                hook["clientConfig"] = {"url": url, "caBundle": bundle}
                if resources & {"pods", "deployments"}:
                    expression = {
                        "key": "kubernetes.io/metadata.name",
                        "operator": "NotIn",
                        "values": sorted(SYSTEM),
                    }
                    hook["namespaceSelector"] = {"matchExpressions": [expression]}
                kept.append(hook)
            doc["webhooks"] = kept
        return docs

    def _configuration(self, setup: Setup) -> str:
        config = yaml.safe_load(setup.config)
        config |= {
            "namespace": "kueue-system",
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "webhook": {"host": "127.0.0.1", "port": self.webhook_port, "certDir": str(self.certs)},
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.health_port}"},
            "metrics": {"bindAddress": "0"},
        }
        return yaml.safe_dump(config)

    def start(self, setup: Setup) -> None:
        """Kueue running with `setup`, its webhooks registered, and its ConfigMap and
        Deployment saying the same, for gpu2dra to read."""
        self.stop()
        config = self.work_dir / f"{setup.name}.yaml"
        config.write_text(self._configuration(setup))
        self.plane.kubectl("apply", "-f", "-", stdin=kueue_objects(setup.config, *setup.args))
        overlay = self.work_dir / "etc"
        shutil.rmtree(overlay, ignore_errors=True)
        for part in ("upper", "work"):
            (overlay / part).mkdir(parents=True)
        metrics = "/etc/kueue/metrics/certs"
        script = " && ".join(
            [
                "mount -t overlay overlay -o "
                f"lowerdir=/etc,upperdir={overlay / 'upper'},workdir={overlay / 'work'} /etc",
                f"mkdir -p {metrics}",
                f"cp {self.certs / 'tls.crt'} {self.certs / 'tls.key'} {metrics}/",
                "exec " + shlex.join([str(self.binary), f"--config={config}", *setup.args]),
            ]
        )
        env = {**os.environ, "KUBECONFIG": str(self.plane.kubeconfig)}
        with self.log.open("ab") as log:
            log.write(f"--- {setup.name}: {' '.join(setup.args)}\n".encode())
            log.flush()
            self.process = subprocess.Popen(
                ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_ready()
        register(self.api, self.webhooks(setup))
        self.setup = setup

    def _wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"Kueue exited: {self.log.read_text()[-3000:]}")
            with (
                contextlib.suppress(urllib.error.URLError, OSError),
                urllib.request.urlopen(url, timeout=2) as answer,
            ):
                if answer.status == 200:
                    return
            time.sleep(0.3)
        raise AssertionError(f"Kueue not ready in {timeout}s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        """Kueue's webhooks unregistered first (they fail closed), then its process ended."""
        for doc in self.webhooks(self.setup) if self.certs.exists() else []:
            unregister(self.api, doc["metadata"]["name"])
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process, self.setup = None, None


def running_kueue(
    plane: ControlPlane, api: client.ApiClient, work_dir: Path
) -> Iterator[KueueManager]:
    """A KueueManager with its CRDs installed; stopped, and its objects removed, after."""
    if os.geteuid() != 0:
        missing("Kueue v0.17's manager needs root here (a mount namespace for /etc/kueue)")
    bin_dir = find_bin_dir()
    require_tools(bin_dir, [n for n in ("kueue/kueue",) if not os.access(bin_dir / n, os.X_OK)])
    manager = KueueManager(plane, api, work_dir)
    manager.install()
    try:
        yield manager
    finally:
        manager.stop()
        remove_kueue(plane)
