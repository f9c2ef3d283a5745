"""What happens to a pod admitted before its ResourceClaimTemplate exists, on the real
controller-manager and scheduler of every release: the alternative to waiting in admission.

    .venv/bin/python -m tests.bench.template_order [--pods N] [--delays 0,50,200,1000]

gpu2dra creates a new shape's template while the API server waits for its answer, so the pod
that needs it is admitted only once it exists. The alternative answers at once and creates the
template afterwards. For each release tests/k8s builds, on fake nodes with GPUs in
ResourceSlices, this measures the time from the first API call until each pod is bound:

- template first: the template created, then the pod (what gpu2dra does; its wait counted);
- pod first: the pod created naming a template that does not exist yet, and the template
  created `delay` ms later (0: at once, as a webhook answering first would);
- never: the template never comes: what the pod and its owner see.

Prints a Markdown table and writes the same as JSON. Not a test: the figures depend on the
machine.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.e2e import (
    CLASS,
    NODE_SET,
    Kube,
    create_namespace,
    create_nodes,
    percentile,
    watching,
)
from tests.support.cluster import device_class
from tests.support.controlplane import ControlPlane, kubernetes_version, release_bin_dir, releases

Obj = dict[str, Any]
NAMESPACE = "order"


def template(name: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": CLASS,
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            }
        },
    }


def pod(name: str, template_name: str, scenario: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"bench": scenario}},
        "spec": {
            "nodeSelector": {NODE_SET: "dra"},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template_name}],
            "containers": [
                {"name": "main", "image": "cuda:12", "resources": {"claims": [{"name": "gpu"}]}}
            ],
        },
    }


def run(kube: Kube, scenario: str, pods: int, delay_ms: float) -> list[float]:
    """Seconds from each pod's first API call until it is bound."""
    base = f"/apis/resource.k8s.io/v1/namespaces/{NAMESPACE}/resourceclaimtemplates"
    pods_path = f"/api/v1/namespaces/{NAMESPACE}/pods"
    starts: dict[str, float] = {}
    with watching(kube, NAMESPACE, f"bench={scenario}") as watch:
        for i in range(pods):
            name = f"{scenario}-{i}"
            starts[name] = time.monotonic()
            if scenario == "template-first":
                kube.call("POST", base, template(name))
                kube.call("POST", pods_path, pod(name, name, scenario))
            else:
                kube.call("POST", pods_path, pod(name, name, scenario))
                time.sleep(delay_ms / 1e3)
                kube.call("POST", base, template(name))
            watch.wait(i + 1, 120)
        return [watch.bound[name] - started for name, started in starts.items()]


def never(kube: Kube, seconds: float) -> dict[str, Any]:
    """A pod whose template never comes: its phase, conditions and events after `seconds`."""
    kube.call("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod("never", "never-made", "never"))
    time.sleep(seconds)
    found = kube.call("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/never")
    events = kube.call(
        "GET",
        f"/api/v1/namespaces/{NAMESPACE}/events?fieldSelector=involvedObject.name%3Dnever",
    )["items"]
    return {
        "after_s": seconds,
        "phase": found["status"].get("phase"),
        "conditions": [
            {k: c.get(k) for k in ("type", "status", "reason", "message")}
            for c in found["status"].get("conditions", [])
        ],
        "events": sorted({f"{e['reason']}: {e['message']}" for e in events}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--pods", type=int, default=20, help="pods per scenario")
    parser.add_argument("--delays", default="0,50,200,1000", help="ms, comma-separated")
    parser.add_argument("--never-seconds", type=float, default=30)
    parser.add_argument("--json", type=Path, default=Path("bench-template-order.json"))
    args = parser.parse_args()
    delays = [float(d) for d in args.delays.split(",") if d]
    rows: list[dict[str, Any]] = []
    stuck: dict[str, Any] = {}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for release in sorted(releases()):
        version = kubernetes_version(release)
        with (
            tempfile.TemporaryDirectory(prefix="gpu2dra-bench-order-") as tmp,
            ControlPlane(release_bin_dir(release), Path(tmp) / "plane") as plane,
        ):
            kube = Kube(plane)
            kube.call("POST", "/apis/resource.k8s.io/v1/deviceclasses", device_class(CLASS, "gpu"))
            create_nodes(plane, "dra", math.ceil(args.pods * (len(delays) + 2) / 8), dra=True)
            create_namespace(kube, NAMESPACE)
            scenarios = [("template-first", "template first", 0.0)] + [
                (f"pod-first-{d:g}", f"pod first, template {d:g} ms later", d) for d in delays
            ]
            for key, label, delay in scenarios:
                print(f"{version}: {label}", flush=True)
                seconds = run(kube, key, args.pods, delay)
                ms = [s * 1e3 for s in seconds]
                rows.append(
                    {
                        "kubernetes": version,
                        "scenario": label,
                        "delay_ms": delay,
                        "bound_p50_ms": round(percentile(ms, 0.5), 1),
                        "bound_max_ms": round(max(ms), 1),
                        "beyond_delay_p50_ms": round(percentile(ms, 0.5) - delay, 1),
                    }
                )
            stuck[version] = never(kube, args.never_seconds)
    print(
        f"\n{started}, {os.cpu_count()} CPUs, {args.pods} pods per scenario, one at a time, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}\n"
    )
    print("| Kubernetes | scenario | bound p50 ms | bound max ms | p50 beyond the delay ms |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['kubernetes']} | {r['scenario']} | {r['bound_p50_ms']} | "
            f"{r['bound_max_ms']} | {r['beyond_delay_p50_ms']} |"
        )
    for version, seen in stuck.items():
        print(f"\n{version}, a pod whose template never comes, after {seen['after_s']:g} s:")
        print(f"  phase {seen['phase']}; conditions {seen['conditions']}")
        for event in seen["events"]:
            print(f"  event {event}")
    args.json.write_text(json.dumps({"rows": rows, "never": stuck}, indent=2) + "\n")
    print(f"\nJSON: {args.json}")


if __name__ == "__main__":
    main()
