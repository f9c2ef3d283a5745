"""What a scrape of `gpu2dra exporter` costs for a large cluster (not a pytest test).

    .venv/bin/python -m tests.bench.bench_exporter [--pods 10000] [--gpus-per-node 8]

Builds pods (one container, one GPU each, as gpu2dra translates them), their allocated claims
and the ResourceSlices of the nodes they run on, as the API server would list them; fills the
exporter's caches through the same extractors its watches use; then times a whole scrape
(GET /metrics: the join and the text exposition; the first, which writes every line, and the
next ones, which reuse the lines of rows unchanged) and the join alone, best and median of
repeats, plus what the caches hold (tracemalloc) and the machine's load while it ran.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from kubernetes import client

from app.exporter.gpuinfo import claim_devices, device_index, pod_gpus, rows, slice_devices
from app.exporter.server import Exporter

Obj = dict[str, Any]


def cluster(pods: int, per_node: int) -> tuple[list[Obj], list[Obj], list[Obj]]:
    nodes = -(-pods // per_node)
    slices = [
        {
            "metadata": {"name": f"node-{n}-gpu.nvidia.com-x"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": f"node-{n}",
                "pool": {"name": f"node-{n}", "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{g}",
                        "attributes": {
                            "type": {"string": "gpu"},
                            "uuid": {"string": f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'{n}/{g}')}"},
                            "productName": {"string": "NVIDIA A100-SXM4-80GB"},
                            "architecture": {"string": "Ampere"},
                            "driverVersion": {"version": "550.107.2"},
                        },
                        "capacity": {"memory": {"value": "80Gi"}},
                    }
                    for g in range(per_node)
                ],
            },
        }
        for n in range(nodes)
    ]
    pod_objs, claim_objs = [], []
    for i in range(pods):
        node, gpu = divmod(i, per_node)
        name, claim = f"train-{i}", f"train-{i}-gpu-abcde"
        pod_objs.append(
            {
                "metadata": {"namespace": f"team-{i % 50}", "name": name, "uid": str(uuid.uuid4())},
                "spec": {
                    "nodeName": f"node-{node}",
                    "containers": [
                        {"name": "trainer", "resources": {"claims": [{"name": "gpu"}]}},
                        {"name": "log-shipper"},
                    ],
                    "resourceClaims": [
                        {"name": "gpu", "resourceClaimTemplateName": "gpu2dra-gpu-x1-337bea9cd5"}
                    ],
                },
                "status": {
                    "phase": "Running",
                    "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}],
                },
            }
        )
        claim_objs.append(
            {
                "metadata": {
                    "namespace": f"team-{i % 50}",
                    "name": claim,
                    "labels": {"app.kubernetes.io/managed-by": "gpu2dra"},
                },
                "spec": {
                    "devices": {
                        "requests": [
                            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}
                        ]
                    }
                },
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {
                                    "request": "gpu",
                                    "driver": "gpu.nvidia.com",
                                    "pool": f"node-{node}",
                                    "device": f"gpu-{gpu}",
                                }
                            ]
                        }
                    }
                },
            }
        )
    return pod_objs, claim_objs, slices


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Best and median wall time of `fn`, in milliseconds."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    return min(times), statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    pods, claims, slices = cluster(args.pods, args.gpus_per_node)

    # As a watch receives them: JSON, parsed, extracted, the parsed object dropped.
    wire = (
        [orjson.dumps(p) for p in pods],
        [orjson.dumps(c) for c in claims],
        [orjson.dumps(s) for s in slices],
    )

    def fill() -> Exporter:
        exporter = Exporter(client.ApiClient())
        for raw in wire[0]:
            p = orjson.loads(raw)
            meta = p["metadata"]
            exporter.pods.put((meta["namespace"], meta["name"]), pod_gpus(p))
        for raw in wire[1]:
            c = orjson.loads(raw)
            meta = c["metadata"]
            exporter.claims.put((meta["namespace"], meta["name"]), claim_devices(c))
        for raw in wire[2]:
            s = orjson.loads(raw)
            exporter.slices.put(s["metadata"]["name"], slice_devices(s))
        return exporter

    start = time.perf_counter()
    exporter = fill()
    extract_ms = (time.perf_counter() - start) * 1000
    tracemalloc.start()
    fill()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()

    def scrape() -> bytes:
        return b"".join(exporter.app({"PATH_INFO": "/metrics"}, lambda *_: None))

    start = time.perf_counter()
    body = scrape()  # the first: every line written
    first_ms = (time.perf_counter() - start) * 1000
    line_bytes = sum(len(line) for line in exporter.info._lines.values())
    series = body.count(b"\ngpu2dra_pod_gpu_info{")
    index = device_index(exporter.slices.items.values())
    kept = [p for p in exporter.pods.items.values() if p is not None]
    join = timed(lambda: rows(kept, exporter.claims.items, index, {"gpu.nvidia.com"}), args.repeats)
    whole = timed(scrape, args.repeats)
    load_after = os.getloadavg()
    print(f"pods {args.pods}, claims {len(claims)}, slices {len(slices)}, series {series}")
    print(f"caches filled (parse + extract): {extract_ms:.0f} ms, hold {held / 2**20:.1f} MiB")
    print(f"join (rows):        best {join[0]:.1f} ms, median {join[1]:.1f} ms")
    print(f"first scrape:       {first_ms:.1f} ms (every line written)")
    print(f"scrape (/metrics):  best {whole[0]:.1f} ms, median {whole[1]:.1f} ms")
    print(f"lines kept between scrapes: {line_bytes / 2**20:.1f} MiB")
    print(f"body {len(body) / 2**20:.2f} MiB")
    print(
        f"load average (1, 5, 15 min) before {', '.join(f'{x:.2f}' for x in load_before)}; "
        f"after {', '.join(f'{x:.2f}' for x in load_after)}; {os.cpu_count()} CPUs"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
