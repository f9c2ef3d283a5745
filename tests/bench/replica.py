"""What one webhook replica holds, as the chart runs it: the image the Dockerfile builds, one
replica with the chart's default resources (100m CPU requested, no CPU limit, 256 Mi memory
limit), on the real node (tests/node), serving the API server through the chart's Service.

    python -m tests.bench.replica [--rates 10,25,50,100] [--seconds 20] [--pods 10000]

Measures its start-up (pod created to Ready; the container started to the app serving), the
pod creates per second whose admission by gpu2dra the API server's histogram puts inside its
25 ms bucket, and its memory (VmRSS) before and after --pods translated pods. The pods carry
a scheduling gate, so that the scheduler (and the node's two GPUs) are no part of what is
measured: gpu2dra translates them, the API server stores them, nothing schedules them.
Root only (the real node); build the image first (tests/image/build.sh). Not a test: the
figures depend on the machine (the load average is printed with them).
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from tests.bench.e2e import Kube, buckets, create_at_rate, delta, load_average, quantile
from tests.node.node import BUSYBOX_IMAGE, RealNode
from tests.support.cluster import create_nvidia_device_classes, gpu_devices
from tests.support.controlplane import (
    REAL_NODE_NAME,
    ControlPlane,
    find_bin_dir,
    release_bin_dir,
    releases,
)
from tests.support.webhook import CHART, RELEASE_NAMESPACE

Obj = dict[str, Any]
WEBHOOK = "pods.mutate.gpu2dra.io"
HISTOGRAM = "apiserver_admission_webhook_admission_duration_seconds"
BUCKET = 0.025  # the API server's second-lowest admission bucket


def gated_pod(name: str) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "schedulingGates": [{"name": "bench.gpu2dra.io/hold"}],
                "containers": [
                    {
                        "name": "main",
                        "image": BUSYBOX_IMAGE,
                        "resources": {"limits": {"nvidia.com/gpu": "1"}},
                    }
                ],
            },
        }
    )


def webhook_pod(kube: Kube) -> Obj:
    listed = kube.call(
        "GET",
        f"/api/v1/namespaces/{RELEASE_NAMESPACE}/pods"
        "?labelSelector=app.kubernetes.io/name%3Dgpu2dra",
    )
    (pod,) = listed["items"]
    return dict(pod)


def when(stamp: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))


def start_up(plane: ControlPlane, pod: Obj) -> dict[str, float]:
    """Pod created to Ready (the kubelet's second resolution), and the container's start to
    the app serving (the log's own times)."""
    ready = next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")
    created = when(pod["metadata"]["creationTimestamp"])
    started = when(pod["status"]["containerStatuses"][0]["state"]["running"]["startedAt"])
    logs = plane.kubectl("logs", "-n", RELEASE_NAMESPACE, pod["metadata"]["name"])
    serving = next(
        when(json.loads(line)["time"])
        for line in logs.splitlines()
        if "Application startup complete" in line
    )
    return {
        "created_to_ready_s": (when(ready["lastTransitionTime"]) - created).total_seconds(),
        "started_to_serving_s": round((serving - started).total_seconds(), 2),
    }


def rss_mib(plane: ControlPlane, pod: Obj) -> float:
    status = plane.kubectl(
        "exec", "-n", RELEASE_NAMESPACE, pod["metadata"]["name"], "--", "cat", "/proc/1/status"
    )
    line = next(x for x in status.splitlines() if x.startswith("VmRSS:"))
    return round(int(line.split()[1]) / 1024, 1)


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    report: dict[str, Any] = {"load_before": load_average(), "rates": []}
    with ControlPlane(release_bin_dir(), work / "plane", client_qps=(1000, 2000)) as plane:
        api = plane.api_client()
        create_nvidia_device_classes(api)
        node = RealNode(
            find_bin_dir() / "node",
            work / "node",
            plane,
            name=REAL_NODE_NAME,
            release=releases()[0],
            devices=gpu_devices(REAL_NODE_NAME, gpus=2),
            api=api,
            pod_network=True,
        )
        node.start()
        try:
            node.ctr("images", "import", str(find_bin_dir() / "image" / "gpu2dra.tar"))
            version = next(
                line.split('"')[1]
                for line in (CHART.parents[1] / "pyproject.toml").read_text().splitlines()
                if line.startswith("version = ")
            )
            values = [
                "replicaCount=1",
                "image.registry=",
                "image.repository=localhost/gpu2dra",
                f"image.tag={version}",
                "image.pullPolicy=Never",
            ]
            sets = [word for value in values for word in ("--set", value)]
            began = time.monotonic()
            namespaced = ["-n", RELEASE_NAMESPACE, "--create-namespace"]
            plane.run_helm("install", "gpu2dra", str(CHART), *namespaced, *sets, "--wait")
            report["helm_install_to_ready_s"] = round(time.monotonic() - began, 1)
            kube = Kube(plane)
            pod = webhook_pod(kube)
            report["start_up"] = start_up(plane, pod)
            report["rss_start_mib"] = rss_mib(plane, pod)
            namespace = "bench"
            kube.call(
                "POST",
                "/api/v1/namespaces",
                {
                    "metadata": {
                        "name": namespace,
                        "labels": {"gpu2dra.io/migration": "enabled"},
                    }
                },
            )
            time.sleep(3)  # the webhook's namespace cache sees the label
            created = 0
            for rate in args.rates:
                bodies = [gated_pod(f"r{rate:g}-{i}") for i in range(round(rate * args.seconds))]
                before = buckets(kube.metrics(), HISTOGRAM, name=WEBHOOK)
                latencies, errors, achieved = create_at_rate(kube, namespace, bodies, rate)
                seen = delta(buckets(kube.metrics(), HISTOGRAM, name=WEBHOOK), before)
                total = seen.get(math.inf, 0.0)
                created += len(latencies)
                p50, p99 = quantile(0.5, seen), quantile(0.99, seen)
                report["rates"].append(
                    {
                        "rate": rate,
                        "achieved": round(achieved, 1),
                        "errors": errors,
                        "admissions": round(total),
                        "within_25ms": round(seen.get(BUCKET, 0.0) / total, 4) if total else None,
                        "webhook_p50": str(p50),
                        "webhook_p99": str(p99),
                        "load": load_average(),
                    }
                )
                print(report["rates"][-1], flush=True)
            rest = max(0, args.pods - created)
            if rest:
                bodies = [gated_pod(f"fill-{i}") for i in range(rest)]
                latencies, errors, _ = create_at_rate(kube, namespace, bodies, args.fill_rate)
                created += len(latencies)
            stored = kube.call("GET", f"/api/v1/namespaces/{namespace}/pods?limit=1")
            report["pods_created"] = created
            report["translated_sample"] = bool(stored["items"][0]["spec"].get("resourceClaims"))
            report["rss_after_mib"] = rss_mib(plane, pod)
            report["load_after"] = load_average()
        finally:
            node.stop()
            api.close()
    return report


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rates", default="10,25,50,100", help="creates per second")
    parser.add_argument("--seconds", type=float, default=20, help="per rate")
    parser.add_argument("--pods", type=int, default=10_000, help="translated pods in all")
    parser.add_argument("--fill-rate", type=float, default=100, help="creates/s past the rates")
    args = parser.parse_args()
    args.rates = [float(r) for r in args.rates.split(",") if r]
    with tempfile.TemporaryDirectory(prefix="gpu2dra-bench-replica-") as tmp:
        report = run(args, Path(tmp))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
