"""The admission path in-process, without HTTP: microseconds per request (the best of three
rounds in turn) and, with --profile, cProfile's top entries of the last round, for the bare
floor and gpu2dra's paths.

    python -m tests.bench.profile_admission [--requests N] [--profile tottime|cumulative]

Paths: `floor` (the benchmark's bare ASGI app), `hit` (a GPU pod whose shape is remembered),
`worker` (a GPU pod with its own rank in env each request, as a training job's workers are),
`new` (a GPU pod of a new shape each request), `plain` (a pod without GPUs). The cluster is a
fake whose templates all exist, as after the first pod of each shape on a live cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import io
import logging
import os
import pstats
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from app.core.policy import load_policy
from app.webhook import logs
from app.webhook.application import create_app
from app.webhook.settings import Settings
from tests.bench import payloads
from tests.bench.floor import app as floor_app
from tests.support.fake import FakeCluster

App = Callable[[Any, Any, Any], Awaitable[None]]
SCOPE = {"type": "http", "method": "POST", "path": "/mutate", "headers": []}


class Existing(FakeCluster):
    def has_templates(self, namespace: str, templates: Any) -> bool:
        return True


def _new_shape(i: int) -> bytes:
    pod = payloads.gpu_pod()
    pod["spec"]["containers"][0]["name"] = f"c{i}"
    return payloads.review(pod)


def _worker(i: int) -> bytes:
    pod = payloads.gpu_pod()
    pod["spec"]["containers"][0]["env"][0]["value"] = str(i)
    return payloads.review(pod)


async def _call(app: App, body: bytes) -> None:
    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        return None

    await app(dict(SCOPE), receive, send)


async def _run(app: App, bodies: list[bytes]) -> float:
    start = time.perf_counter()
    for body in bodies:
        await _call(app, body)
    return (time.perf_counter() - start) / len(bodies) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--profile", choices=("tottime", "cumulative"))
    args = parser.parse_args()
    logs.configure("info", "json")
    (handler,) = logging.getLogger().handlers
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115  # the lines a server would write
    cluster = Existing(labels={"ml": {"gpu2dra.io/migration": "enabled"}})
    gpu2dra = create_app(Settings(policy=load_policy(None)), cluster)
    gpu2dra.cluster = cluster
    n = args.requests
    paths: dict[str, tuple[App, list[bytes]]] = {
        "floor": (floor_app, [payloads.review(payloads.gpu_pod())] * n),
        "hit": (gpu2dra, [payloads.review(payloads.gpu_pod())] * n),
        "worker": (gpu2dra, [_worker(i) for i in range(n)]),
        "new": (gpu2dra, [_new_shape(i) for i in range(n)]),
        "plain": (gpu2dra, [payloads.review(payloads.plain_pod())] * n),
    }
    loop = asyncio.new_event_loop()
    # Rounds in turn, the best of each path: the first path measured after start-up runs
    # half as fast again as it does once the process is warm.
    best: dict[str, float] = {}
    for last in (False, False, True):
        for name, (app, bodies) in paths.items():
            loop.run_until_complete(_run(app, bodies[:200]))  # warm up
            profiler = cProfile.Profile() if args.profile and last else None
            if profiler:
                profiler.enable()
            micros = loop.run_until_complete(_run(app, bodies))
            best[name] = min(best.get(name, micros), micros)
            if profiler:
                profiler.disable()
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats(args.profile).print_stats(12)
                print(f"{name}:\n{out.getvalue()}")
    for name, micros in best.items():
        print(f"{name:6} {micros:8.1f} µs/request (best of 3 rounds)")


if __name__ == "__main__":
    main()
