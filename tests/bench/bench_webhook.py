"""gpu2dra beside the floor: the same uvicorn settings, one pinned CPU core, TLS, keep-alive.

    bash tests/bench/run.sh          (installs wrk, builds vegeta, then runs this)

Prints one table: requests/s, p50, p99, ratio to the floor, the server's CPU time per request
and the same ratio by it (what another process on the server's core cannot skew), RSS before
and after, and the API calls the webhook made while under load (must be 0 once its caches are
warm); then both servers asked one request at a time, as the API server asks at a low create
rate. Not a test: the figures depend on the machine; the README shows the latest run.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import yaml

from app.manifests import yamlwrite
from app.webhook.certs import make_certs
from app.webhook.runner import KEEP_ALIVE_SECONDS
from tests.bench import payloads

ROOT = Path(__file__).resolve().parents[2]
VEGETA = ROOT / ".bin" / "vegeta"  # built by run.sh from the Go module proxy
SERVER_CPU, LOAD_CPU = "0", "1"
POST_LUA = """\
local f = io.open(os.getenv("BODY"), "rb"); wrk.body = f:read("*a"); f:close()
wrk.method = "POST"; wrk.headers["Content-Type"] = "application/json"
"""


def _each_request(find: str, make: str) -> str:
    """A wrk script whose every request is the body with the Lua pattern `find` replaced by
    the Lua expression `make` of the request's number `n`."""
    return f"""\
local f = io.open(os.getenv("BODY"), "rb"); local body = f:read("*a"); f:close()
local headers, n = {{["Content-Type"] = "application/json"}}, 0
request = function()
  n = n + 1
  local varied = body:gsub('{find}', {make}, 1)
  return wrk.format("POST", nil, headers, varied)
end
"""


# Every request a pod of a new shape (its first container renamed): no answer is remembered.
NEW_SHAPE_LUA = _each_request('"name":"trainer"', """'"name":"trainer' .. n .. '"'""")
# Every request another worker of one training job, its rank in env as a training operator
# sets it: translate() does not read env values, so the answer is remembered.
WORKER_LUA = _each_request('"value":"value%-0"', """'"value":"' .. n .. '"'""")


@dataclass
class Row:
    name: str
    rps: float
    p50_ms: float
    p99_ms: float
    ratio: float | None = None  # to the floor's req/s
    rss: str = ""
    raw: str = ""  # the load generator's own report
    cpu_us: float | None = None  # the server's CPU time per request
    cpu_ratio: float | None = None  # the floor's CPU time per request over this row's

    def cells(self) -> list[str]:
        return [
            self.name,
            f"{self.rps:,.0f}",
            f"{self.p50_ms:.2f}",
            f"{self.p99_ms:.2f}",
            f"{self.ratio:.0%}" if self.ratio else "-",
            f"{self.cpu_us:.0f}" if self.cpu_us else "",
            f"{self.cpu_ratio:.0%}" if self.cpu_ratio else "-",
            self.rss,
        ]


def pinned(cpu: str, *command: str) -> list[str]:
    return ["taskset", "-c", cpu, *command] if shutil.which("taskset") else list(command)


def _ms(text: str) -> float:
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text).groups()  # type: ignore[union-attr]
    return float(value) * {"us": 0.001, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6}[unit]


def floor_command(port: int, cert: Path, key: Path) -> list[str]:
    """The floor served by uvicorn with TLS and gpu2dra's settings (keep-alive included)."""
    return [
        *(sys.executable, "-m", "uvicorn", "tests.bench.floor:app", "--port", str(port)),
        *("--no-access-log", "--log-level", "warning"),
        *("--timeout-keep-alive", str(KEEP_ALIVE_SECONDS)),
        *("--ssl-certfile", str(cert), "--ssl-keyfile", str(key)),
    ]


def cpu_seconds(pid: int) -> float:
    """The process's user and system CPU time so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(
    url: str,
    body: Path,
    seconds: int,
    work: Path,
    lua: str = POST_LUA,
    connections: int = 16,
    pid: int | None = None,
) -> Row:
    """Closed-loop load at the server's full speed; with `pid`, its CPU time per request
    too, which another process sharing its core does not inflate as it does req/s."""
    script = work / "post.lua"
    script.write_text(lua)
    cpu = cpu_seconds(pid) if pid else 0.0
    out = subprocess.run(
        pinned(
            LOAD_CPU,
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            url,
        ),
        env={**os.environ, "BODY": str(body)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    if "Non-2xx" in out or "Socket errors" in out:
        raise SystemExit(f"wrk saw errors against {url}:\n{out}")
    try:
        rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
        # at the start of a line: "68.50%" in the thread stats must not pass for the p50
        p50 = _ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
        p99 = _ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    except AttributeError:
        raise SystemExit(f"wrk's report against {url} could not be read:\n{out}") from None
    row = Row("", rps, p50, p99)
    row.raw = out
    if pid:
        served = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
        row.cpu_us = (cpu_seconds(pid) - cpu) / served * 1e6
    return row


def _median(rows: list[Row]) -> Row:
    """The round with the median req/s."""
    return sorted(rows, key=lambda r: r.rps)[len(rows) // 2]


def vegeta(url: str, body: Path, rate: float, seconds: int, work: Path) -> Row:
    """Open-loop load at a constant rate (vegeta): latency when not saturated, each request
    timed from when it was due, so a stall is not hidden by requests not sent."""
    targets = work / "targets.txt"
    targets.write_text(f"POST {url}\nContent-Type: application/json\n@{body}\n")
    attack = subprocess.run(
        pinned(
            LOAD_CPU,
            str(VEGETA),
            "attack",
            f"-targets={targets}",
            f"-rate={rate:.0f}/s",
            f"-duration={seconds}s",
            "-insecure",
            "-http2=false",
            "-workers=16",
            "-max-workers=16",
            "-connections=16",
        ),
        capture_output=True,
        check=True,
    ).stdout
    report = orjson.loads(
        subprocess.run(
            [str(VEGETA), "report", "-type=json"], input=attack, capture_output=True, check=True
        ).stdout
    )
    if set(report["status_codes"]) != {"200"}:
        raise SystemExit(f"vegeta saw answers other than 200 from {url}: {report['status_codes']}")
    latency = report["latencies"]
    return Row("", report["throughput"], latency["50th"] / 1e6, latency["99th"] / 1e6)


def one_at_a_time(urls: list[str], body: bytes, count: int, interval: float) -> list[Row]:
    """Each URL asked in turn, `interval` seconds apart, one request in flight, each over its
    own kept-alive TLS connection: what the API server waits for at a low create rate, where
    every request wakes an idle server, apart from the API server. The client's clock."""
    import ssl

    context = ssl._create_unverified_context()  # a local probe, as wrk and vegeta
    connections = []
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        conn = http.client.HTTPSConnection(parts.netloc, context=context)
        connections.append((conn, parts.path or "/"))
    times: list[list[float]] = [[] for _ in urls]
    headers = {"Content-Type": "application/json"}
    try:
        for i in range(count + 5):  # the first five open the connections, and are not kept
            for (conn, path), kept in zip(connections, times, strict=True):
                time.sleep(interval)
                started = time.perf_counter()
                conn.request("POST", path, body, headers)
                response = conn.getresponse()
                response.read()
                took = time.perf_counter() - started
                if response.status != 200:
                    raise SystemExit(f"{path}: answered {response.status}")
                if i >= 5:
                    kept.append(took)
    finally:
        for conn, _ in connections:
            conn.close()
    rate = 1 / (interval * len(urls))
    return [
        Row("", rate, statistics.median(t) * 1e3, sorted(t)[int(len(t) * 0.99)] * 1e3)
        for t in times
    ]


def own_totals(metrics_url: str) -> tuple[float, float]:
    """gpu2dra's own time answering /mutate so far, and its answers (gpu2dra_request_seconds)."""
    return (
        metrics_total(metrics_url, r'gpu2dra_request_seconds_sum\{endpoint="mutate"\}'),
        metrics_total(metrics_url, r'gpu2dra_request_seconds_count\{endpoint="mutate"\}'),
    )


def mean_since(before: tuple[float, float], now: tuple[float, float]) -> float:
    """The mean of the answers between two `own_totals`."""
    return (now[0] - before[0]) / (now[1] - before[1])


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def wait_up(url: str, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    import ssl

    context = ssl._create_unverified_context()  # a local probe; wrk does not verify either
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: the server exited")
        try:
            urllib.request.urlopen(url, context=context, timeout=2).read()
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not come up")


def patched(url: str, body: bytes) -> bool:
    """Whether the webhook answers `body` with a patch: the translated row measures a
    translation, not a pod left as it is."""
    import ssl

    request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
    context = ssl._create_unverified_context()
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return "patch" in orjson.loads(answer.read())["response"]


def metrics_total(url: str, pattern: str) -> float:
    import ssl

    text = urllib.request.urlopen(url, context=ssl._create_unverified_context()).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if re.match(pattern, line)
    )


@contextmanager
def serving(
    command: list[str],
    url: str,
    env: dict[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        pinned(SERVER_CPU, *command),
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_up(url, process)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def cluster(work: Path) -> Iterator[tuple[str | None, str]]:
    """A real control plane when its binaries are built (so API calls can be counted)."""
    from tests.support.controlplane import (
        ControlPlane,
        kubernetes_version,
        missing_binaries,
        release_bin_dir,
        releases,
    )

    if missing_binaries(release_bin_dir()):
        yield None, "offline (no control plane binaries: run tests/k8s/build.sh to count API calls)"
        return
    with ControlPlane(release_bin_dir(), work / "plane") as plane:
        api = plane.api_client()
        from kubernetes import client

        client.CoreV1Api(api).create_namespace(
            client.V1Namespace.model_validate(
                {"metadata": {"name": "ml", "labels": {"gpu2dra.io/migration": "enabled"}}}
            )
        )
        for name in ("gpu.nvidia.com", "mig.nvidia.com"):
            client.CustomObjectsApi(api).create_cluster_custom_object(
                "resource.k8s.io",
                "v1",
                "deviceclasses",
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "DeviceClass",
                    "metadata": {"name": name},
                    "spec": {},
                },
            )
        # A device of gpu.nvidia.com on some node: gpu2dra translates a pod only where a
        # driver publishes a device its claims could take (app/core/capacity.py).
        device = {"name": "gpu-0", "attributes": {"type": {"string": "gpu"}}}
        client.CustomObjectsApi(api).create_cluster_custom_object(
            "resource.k8s.io",
            "v1",
            "resourceslices",
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceSlice",
                "metadata": {"name": "bench"},
                "spec": {
                    "driver": "gpu.nvidia.com",
                    "nodeName": "bench",
                    "pool": {"name": "bench", "generation": 1, "resourceSliceCount": 1},
                    "devices": [device],
                },
            },
        )
        version = kubernetes_version(releases()[0])
        yield str(plane.kubeconfig), f"live (real kube-apiserver {version}, caches warm)"


def translate_cli(work: Path, document: dict[str, Any]) -> tuple[float, float]:
    """Seconds `gpu2dra translate` takes for 10,000 copies of `document`, and the MB read."""
    docs = []
    for i in range(10_000):
        metadata = {**document.get("metadata", {}), "name": f"w{i}", "namespace": "ml"}
        docs.append({**document, "metadata": metadata})
    manifest = work / "10k.yaml"
    manifest.write_text(yamlwrite.dump_all(docs))
    every_cpu = f"0-{(os.cpu_count() or 1) - 1}"  # this process is pinned to the load's CPU
    started = time.perf_counter()
    subprocess.run(
        pinned(every_cpu, sys.executable, "-m", "app", "translate", "-f", str(manifest)),
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started, manifest.stat().st_size / 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=5, help="per measurement")
    parser.add_argument(
        "--rounds", type=int, default=3, help="floor-then-row pairs per row (the median is kept)"
    )
    parser.add_argument(
        "--soak", type=int, default=1_000_000, help="requests for the memory check (0 to skip)"
    )
    parser.add_argument(
        "--one-at-a-time",
        type=int,
        default=200,
        help="requests to each server one at a time, 0.1 s apart (0 to skip)",
    )
    args = parser.parse_args()
    if shutil.which("wrk") is None or not VEGETA.exists():
        raise SystemExit("wrk or vegeta is missing: bash tests/bench/run.sh installs both")
    # Everything but the server under test (the control plane, the load) stays off its core.
    if hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {int(LOAD_CPU)})

    with tempfile.TemporaryDirectory(prefix="gpu2dra-bench-") as tmp:
        work = Path(tmp)
        paths = make_certs(["localhost"], ["127.0.0.1"]).write(work / "certs")
        bodies = {
            "gpu": payloads.review(payloads.gpu_pod()),
            "plain": payloads.review(payloads.plain_pod()),
            "template": payloads.review(
                payloads.claim_template(), "ResourceClaimTemplate", "resource.k8s.io"
            ),
        }
        files = {}
        for name, body in bodies.items():
            files[name] = work / f"{name}.json"
            files[name].write_bytes(body)
        policy = work / "policy.yaml"
        policy.write_text("defaultMode: enabled\n")

        with cluster(work) as (kubeconfig, mode):
            # The floor runs beside the same control plane, so both see the same background.
            floor_url = "https://127.0.0.1:18443/"
            uvicorn = floor_command(18443, paths["tls.crt"], paths["tls.key"])
            env = {**os.environ}
            command = [
                sys.executable,
                "-m",
                "app",
                "serve",
                "--port",
                "18444",
                "--cert",
                str(paths["tls.crt"]),
                "--key",
                str(paths["tls.key"]),
                "--policy",
                str(policy),
                "--log-level",
                "warning",
            ]
            if kubeconfig:
                env["KUBECONFIG"] = kubeconfig
            else:
                command.append("--offline")
            base = "https://127.0.0.1:18444"
            # Both servers stay up, idle but for the one under load: each row is measured
            # right after the floor, so that a machine whose speed drifts (a shared VM)
            # compares like with like.
            with (
                serving(uvicorn, floor_url) as bare,
                serving(command, f"{base}/readyz", env) as hook,
            ):
                wrk(floor_url, files["gpu"], 2, work)  # warm-up
                wrk(f"{base}/mutate", files["gpu"], 2, work)  # warm-up: creates the template
                if not patched(f"{base}/mutate", bodies["gpu"]):
                    raise SystemExit("gpu2dra did not translate the GPU pod: nothing to measure")
                calls = f"{base}/metrics"
                hot = r'gpu2dra_api_calls_total\{resource="resourceclaim\w*",verb="(create|get)"\}'
                before = metrics_total(calls, hot)
                rows: list[Row] = []
                own_loaded = 0.0  # gpu2dra's own mean answer to a remembered pod, under load
                for name, path, label, lua in [
                    ("gpu", "/mutate", "/mutate, GPU pod (translated)", POST_LUA),
                    ("gpu", "/mutate", "/mutate, GPU pod, each its own rank in env", WORKER_LUA),
                    ("gpu", "/mutate", "/mutate, GPU pod, each of a new shape", NEW_SHAPE_LUA),
                    ("plain", "/mutate", "/mutate, pod without GPUs", POST_LUA),
                    ("template", "/validate", "/validate, ResourceClaimTemplate", POST_LUA),
                ]:
                    own_before = own_totals(calls)
                    pairs = [
                        (
                            wrk(floor_url, files["gpu"], args.seconds, work, pid=bare.pid),
                            wrk(
                                f"{base}{path}", files[name], args.seconds, work, lua, pid=hook.pid
                            ),
                        )
                        for _ in range(args.rounds)
                    ]
                    floor = _median([f for f, _ in pairs])
                    floor.name = "floor: bare ASGI app, parse + allowed"
                    row = _median([r for _, r in pairs])
                    row.name = label
                    row.ratio = statistics.median(r.rps / f.rps for f, r in pairs)
                    row.cpu_ratio = statistics.median(
                        f.cpu_us / r.cpu_us for f, r in pairs if f.cpu_us and r.cpu_us
                    )
                    rows += [floor, row]
                    if lua is POST_LUA and name == "gpu":  # a remembered pod, under load
                        own_loaded = mean_since(own_before, own_totals(calls))
                rate = rows[0].rps / 2
                halves = [
                    (
                        vegeta(floor_url, files["gpu"], rate, args.seconds, work),
                        vegeta(f"{base}/mutate", files["gpu"], rate, args.seconds, work),
                    )
                    for _ in range(args.rounds)
                ]
                # the round whose difference of p50s is the median one
                floor_half, half = sorted(halves, key=lambda p: p[1].p50_ms - p[0].p50_ms)[
                    len(halves) // 2
                ]
                floor_half.name = "floor, at half its rate (vegeta)"
                half.name = "/mutate, GPU pod, at half the floor's rate (vegeta)"
                half.ratio = half.rps / rows[0].rps
                rows += [floor_half, half]
                alone: list[Row] = []
                if args.one_at_a_time:
                    own_before = own_totals(calls)
                    alone = one_at_a_time(
                        [floor_url, f"{base}/mutate"], bodies["gpu"], args.one_at_a_time, 0.1
                    )
                    own_alone = mean_since(own_before, own_totals(calls))
                    alone[0].name = "floor, one request at a time"
                    alone[1].name = "/mutate, GPU pod, one request at a time"
                    rows += alone
                api_calls = metrics_total(calls, hot) - before
                if args.soak:
                    rss_start = rss_mib(hook.pid)  # the memo already full from the rows above
                    seconds = max(10, int(args.soak / rows[1].rps))
                    soak = wrk(f"{base}/mutate", files["gpu"], seconds, work)
                    soak.name, soak.ratio = f"soak: ~{args.soak:,} GPU pods", soak.rps / rows[0].rps
                    soak.rss = f"{rss_start:.0f} -> {rss_mib(hook.pid):.0f} MiB"
                    rows.append(soak)
                api_calls_total = metrics_total(calls, hot) - before

    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\ngpu2dra {mode}; server on CPU {SERVER_CPU}, load on CPU {LOAD_CPU}, TLS, keep-alive; "
        f"{when}, load average (1/5/15 min) {load} at the end\n"
    )
    header = ["", "req/s", "p50 ms", "p99 ms", "of floor", "CPU µs/req", "of floor, by CPU", "RSS"]
    table = [header, ["---"] * len(header)] + [r.cells() for r in rows]
    for line in table:
        print("| " + " | ".join(line) + " |")
    print(
        f"\nAPI calls on the admission path under load: {api_calls:.0f} "
        f"(with the soak: {api_calls_total:.0f})"
    )
    if alone:
        floor_alone, hook_alone = alone
        print(
            f"One request at a time: gpu2dra's p50 {hook_alone.p50_ms:.3f} ms, "
            f"{hook_alone.p50_ms - floor_alone.p50_ms:+.3f} ms beyond the floor's "
            f"{floor_alone.p50_ms:.3f} ({args.one_at_a_time} requests each); by its own clock "
            f"(gpu2dra_request_seconds), {own_alone * 1e6:.0f} µs an answer on average, against "
            f"{own_loaded * 1e6:.0f} µs under load"
        )
    work = Path(tempfile.mkdtemp())
    job = yaml.safe_load((ROOT / "examples" / "training-job.yaml").read_text())
    for what, document in (("the example Job", job), ("the typical GPU pod", payloads.gpu_pod())):
        took, mb = translate_cli(work, document)
        print(f"gpu2dra translate, 10,000 x {what} ({mb:.1f} MB): {took:.2f} s")


if __name__ == "__main__":
    main()
