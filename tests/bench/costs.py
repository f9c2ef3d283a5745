"""What a workload cost, seen from each side: the CPU each process and the machine spent, the
API server's own time for each request (its audit log, to the microsecond, where its
histograms have buckets of 5 and 25 ms), and which of gpu2dra's threads held the GIL (py-spy
sampling the live process)."""

from __future__ import annotations

import collections
import contextlib
import re
import shutil
import statistics
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import orjson

from tests.bench.bench_webhook import cpu_seconds

# -- CPU ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    processes: dict[str, float]  # name -> CPU seconds so far
    waits: dict[str, float]  # name -> seconds its threads were runnable but had no core
    busy: int  # the machine's busy jiffies (all cores), from /proc/stat
    total: int


def run_queue_wait(pid: int) -> float:
    """Seconds the process's live threads have spent runnable, waiting for a core (the
    scheduler's own count, /proc/<pid>/task/<tid>/schedstat): what a starved process adds to
    every request it serves, unseen by its own clocks."""
    waited = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that has just ended
            waited += int((task / "schedstat").read_text().split()[1])
    return waited / 1e9


def _machine() -> tuple[int, int]:
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def snapshot(pids: Mapping[str, int]) -> Snapshot:
    busy, total = _machine()
    return Snapshot(
        {name: cpu_seconds(pid) for name, pid in pids.items()},
        {name: run_queue_wait(pid) for name, pid in pids.items()},
        busy,
        total,
    )


@dataclass(frozen=True)
class Spent:
    ms_per_pod: dict[str, float]  # CPU milliseconds per pod, by process
    wait_ms_per_pod: dict[str, float]  # milliseconds runnable without a core, per pod
    busy_percent: float  # of all the machine's cores, over the window


def spent(before: Snapshot, after: Snapshot, pods: int) -> Spent:
    def per_pod(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
        return {name: round((a[name] - b[name]) * 1e3 / max(pods, 1), 2) for name in b}

    window = after.total - before.total
    busy = 100.0 * (after.busy - before.busy) / window if window else 0.0
    return Spent(
        per_pod(after.processes, before.processes),
        per_pod(after.waits, before.waits),
        round(busy, 1),
    )


# -- the API server's audit log ----------------------------------------------------------------

# Creates of pods and of ResourceClaimTemplates only, at Metadata level (no bodies), written in
# batches each second: what the log costs the API server is small and the same in every setup.
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    verbs: [create]
    resources:
      - {group: "", resources: [pods]}
      - {group: resource.k8s.io, resources: [resourceclaimtemplates]}
  - level: None
"""


def audit_args(work: Path) -> tuple[list[str], Path]:
    """The API server's flags for the audit log, and the log's path."""
    work.mkdir(parents=True, exist_ok=True)
    policy, log = work / "audit-policy.yaml", work / "audit.log"
    policy.write_text(AUDIT_POLICY)
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log}",
        "--audit-log-mode=batch",
        "--audit-log-batch-max-wait=1s",
        "--audit-log-maxsize=0",
    ], log


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Served:
    """One pod create as the API server timed it."""

    received: float  # wall clock
    seconds: float
    status: int


def creates(
    log: Path, namespace: str, since: float, until: float, resource: str = "pods"
) -> list[Served]:
    """The creates of `resource` in `namespace` the API server received between two
    wall-clock times, each with its own time from receiving the request to its response."""
    found: list[Served] = []
    if not log.exists():
        return found
    with log.open("rb") as lines:
        for line in lines:
            event = orjson.loads(line)
            ref = event.get("objectRef") or {}
            if ref.get("namespace") != namespace or ref.get("resource") != resource:
                continue
            received = _at(event["requestReceivedTimestamp"])
            if since <= received <= until:
                seconds = _at(event["stageTimestamp"]) - received
                status = (event.get("responseStatus") or {}).get("code", 0)
                found.append(Served(received, seconds, status))
    return found


# -- the GIL -----------------------------------------------------------------------------------


def py_spy() -> str:
    """py-spy's path; the benchmark's --profile needs it (pip install py-spy)."""
    found = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if not found:
        raise SystemExit("--profile needs py-spy: .venv/bin/pip install py-spy")
    return found


class GilProfile:
    """py-spy sampling a live process while a workload runs: the share of samples in which
    each thread held the GIL (while it holds it, the event loop cannot answer)."""

    RATE = 250  # samples per second

    def __init__(self, pid: int, seconds: float, out: Path) -> None:
        self.out, self.seconds = out, seconds
        self.process = subprocess.Popen(
            [
                py_spy(),
                *("record", "--pid", str(pid), "--rate", str(self.RATE)),
                *("--duration", str(max(1, round(seconds)))),
                *("--gil", "--threads", "--nonblocking", "--format", "raw", "-o", str(out)),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def shares(self) -> dict[str, float]:
        """Thread name -> percent of the time it held the GIL."""
        self.process.wait(timeout=self.seconds + 60)
        samples = self.RATE * max(1, round(self.seconds))
        return gil_shares(self.out.read_text().splitlines(), samples)


def gil_shares(lines: Iterable[str], samples: int) -> dict[str, float]:
    """From py-spy's raw output (`thread (tid): name;frame;... count` per line), each thread's
    samples as a percent of all the samples taken; watch threads summed as `watch-*`."""
    held: collections.Counter[str] = collections.Counter()
    for line in lines:
        stack, _, count = line.rpartition(" ")
        thread = stack.split(";", 1)[0]
        name = thread.split(": ", 1)[1] if ": " in thread else thread
        held["watch-*" if name.startswith("watch-") else name] += int(count)
    return {name: round(100.0 * n / max(samples, 1), 2) for name, n in held.most_common()}


# -- the webhook's own reads and writes --------------------------------------------------------


class Syscalls:
    """strace on a webhook's main thread (its event loop) while a workload runs: when each
    request's bytes were read and its answer written, by the kernel's clock, to set beside
    the API server's own times. strace slows each read and write by tens of microseconds:
    for a low rate, and a run of its own."""

    def __init__(self, pid: int, out: Path) -> None:
        strace = shutil.which("strace")
        if not strace:
            raise SystemExit("--trace needs strace (apt-get install strace)")
        self.out = out
        self.process = subprocess.Popen(
            [strace, "-tt", "-e", "trace=read,write", "-p", str(pid), "-o", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def segments(self, served: list[Served]) -> dict[str, float]:
        """Median milliseconds of each part of the API server's POST, over the creates seen
        in the trace: until the webhook read the request, the webhook's own, and after it
        wrote its answer (the rest of admission, storage, the response)."""
        self.process.terminate()
        self.process.wait(timeout=30)
        day = datetime.fromtimestamp(served[0].received, UTC).date() if served else None
        return split(self.out.read_text().splitlines(), served, str(day))


_CALL = re.compile(r"^(\d+:\d+:\d+\.\d+) (read|write)\((\d+),.*\) = (\d+)$")


def split(lines: Iterable[str], served: list[Served], day: str) -> dict[str, float]:
    """See Syscalls.segments: a request is the first read of over 512 bytes (a TLS record
    holding an AdmissionReview, not a handshake's) inside a create's window, its answer the
    last write on that connection before the create completed."""
    calls = []
    for line in lines:
        if m := _CALL.match(line):
            at = datetime.fromisoformat(f"{day}T{m.group(1)}+00:00").timestamp()
            calls.append((at, m.group(2), int(m.group(3)), int(m.group(4))))
    calls.sort()
    parts: dict[str, list[float]] = {"before": [], "webhook": [], "after": []}
    for create in served:
        end = create.received + create.seconds
        window = [c for c in calls if create.received <= c[0] <= end]
        reads = [c for c in window if c[1] == "read" and c[3] > 512]
        if not reads:
            continue
        read = reads[0]
        writes = [c for c in window if c[1] == "write" and c[2] == read[2] and c[0] >= read[0]]
        if not writes:
            continue
        parts["before"].append(read[0] - create.received)
        parts["webhook"].append(writes[-1][0] - read[0])
        parts["after"].append(end - writes[-1][0])
    if not parts["before"]:
        return {}
    found = {name: round(statistics.median(v) * 1e3, 2) for name, v in parts.items()}
    return {**found, "creates": len(parts["before"])}
