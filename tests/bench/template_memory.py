"""The webhook's memory with many ResourceClaimTemplates in the cluster, on the real control
plane: gpu2dra's own (labelled, `templatesPerNamespace` in each namespace) and foreign ones.

    .venv/bin/python -m tests.bench.template_memory [--own 40000] [--foreign 5000]

One control plane of the newest release (tests/k8s); the templates are created first, as the
admin, with no webhook registered; then `gpu2dra serve` starts as the e2e tests run it, and
the figures are read from /proc: its resident memory once every cache has synced (/readyz),
its peak (VmHWM), and both again after the API server restarts, which breaks every watch and
makes each cache list again (the old map stays alive until the new one is built). Not a
timed test: it prints what it measured, for docs/operations/capacity.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kubernetes import client

from app.core.policy import DEFAULT
from app.core.templates import DeviceRequest
from tests.support import webhook
from tests.support.controlplane import ControlPlane, release_bin_dir
from tests.support.webhook import Webhook

Obj = dict[str, Any]
MiB = 1024 * 1024


def own(i: int) -> Obj:
    """gpu2dra's template for a pod whose nodeSelector names product string `i`: the shape
    that makes a new template each time."""
    selector = f"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA-PRODUCT-{i}'"
    return copy.deepcopy(DeviceRequest("gpu", "gpu.nvidia.com", 1, (selector,)).template())


def foreign(i: int) -> Obj:
    template = own(i)
    template["metadata"] = {"name": f"team-template-{i}", "labels": {"team": "ml"}}
    return template


def status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid`, in bytes."""
    found = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            found[key] = int(value.split()[0]) * 1024
    return found


def create_all(api: client.ApiClient, jobs: list[tuple[str, Obj]]) -> float:
    resource = client.ResourceV1Api(api)
    started = time.monotonic()

    def create(job: tuple[str, Obj]) -> None:
        resource.create_namespaced_resource_claim_template(job[0], job[1], _preload_content=False)

    with ThreadPoolExecutor(32) as pool:
        list(pool.map(create, jobs))
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--own", type=int, default=40_000)
    parser.add_argument("--foreign", type=int, default=5_000)
    parser.add_argument(
        "--app",
        type=Path,
        help="serve the app of this tree instead (another version, to compare: `git archive`)",
    )
    args = parser.parse_args()
    if args.app is not None:
        webhook.REPO_ROOT = args.app.resolve()  # type: ignore[attr-defined]
    per_namespace = int(DEFAULT["templatesPerNamespace"])
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(release_bin_dir(), Path(tmp)) as plane:
        api = plane.api_client()
        api.configuration.connection_pool_maxsize = 32
        api.rest_client.pool_manager.connection_pool_kw["maxsize"] = 32
        core = client.CoreV1Api(api)
        jobs: list[tuple[str, Obj]] = []
        for i in range(args.own):
            jobs.append((f"own-{i // per_namespace}", own(i)))
        for i in range(args.foreign):
            jobs.append((f"foreign-{i // 100}", foreign(i)))
        for namespace in sorted({ns for ns, _ in jobs}):
            core.create_namespace({"metadata": {"name": namespace}})
        seconds = create_all(api, jobs)
        print(f"created {len(jobs)} templates in {seconds:.0f}s")

        hook = Webhook(Path(tmp), plane.kubeconfig, plane.helm)
        started = time.monotonic()
        figures: dict[str, Any] = {
            "own": args.own,
            "foreign": args.foreign,
            "app": str(args.app or "this tree"),
        }
        try:
            hook.start(timeout=300)
        except AssertionError as err:  # never ready: what it holds then, and why
            assert hook.process is not None
            figures |= {"ready": False, "why": str(err)[-600:], **status(hook.process.pid)}
            print(json.dumps(figures))
            hook.stop()
            return
        assert hook.process is not None
        figures |= {
            "ready_seconds": round(time.monotonic() - started, 1),
            "cached": hook.metric("gpu2dra_cache_objects", cache="resourceclaimtemplates"),
        }
        time.sleep(5)
        figures["cached_later"] = hook.metric(
            "gpu2dra_cache_objects", cache="resourceclaimtemplates"
        )
        figures["lists"] = hook.metric(
            "gpu2dra_api_calls_total", verb="list", resource="resourceclaimtemplates"
        )
        at_rest = status(hook.process.pid)
        figures |= {"rss_mib": at_rest["VmRSS"] / MiB, "peak_mib": at_rest["VmHWM"] / MiB}
        relists = hook.metric("gpu2dra_cache_relists_total", cache="resourceclaimtemplates")
        plane.restart_apiserver()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                again = hook.metric("gpu2dra_cache_relists_total", cache="resourceclaimtemplates")
                done = hook.metric("gpu2dra_cache_synced", cache="resourceclaimtemplates")
            except OSError:
                again, done = relists, 0
            if again > relists and done == 1:
                break
            time.sleep(1)
        time.sleep(5)
        after = status(hook.process.pid)
        figures |= {
            "rss_after_relist_mib": after["VmRSS"] / MiB,
            "peak_after_relist_mib": after["VmHWM"] / MiB,
        }
        hook.stop()
        api.close()
        print(
            json.dumps({k: round(v, 1) if isinstance(v, float) else v for k, v in figures.items()})
        )


if __name__ == "__main__":
    main()
