"""The real node's stand-in for the device plugin's and the DRA driver's DaemonSets
(tests/node/node.py DaemonSets): each plugin runs exactly while the node's labels select it,
with `sleep` standing in for the plugins and a dict for the node's labels."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from typing import cast

import pytest

from tests.node.node import DEVICE_PLUGIN, DRA_PLUGIN, SELECTORS, DaemonSets, RealNode

PLUGIN_ON = {SELECTORS[DEVICE_PLUGIN][0]: "true"}
DRA_ON = {SELECTORS[DEVICE_PLUGIN][0]: "false", SELECTORS[DRA_PLUGIN][0]: "true"}
BOTH = {SELECTORS[DEVICE_PLUGIN][0]: "true", SELECTORS[DRA_PLUGIN][0]: "true"}


class Host:
    """What DaemonSets uses of a RealNode: its binaries are `sleep`."""

    def __init__(self) -> None:
        self.started: list[subprocess.Popen[bytes]] = []

    def plugin_args(self, name: str) -> list[str]:
        return []

    def popen(self, name: str, args: Sequence[str]) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(["sleep", "60"])
        self.started.append(process)
        return process


class Labelled(DaemonSets):
    labels: dict[str, str] | None = None

    def read_labels(self) -> dict[str, str] | None:
        return None if self.labels is None else dict(self.labels)


@pytest.fixture
def stacks() -> Iterator[tuple[Labelled, Host]]:
    host = Host()
    daemonsets = Labelled(cast(RealNode, host), poll=0.05)
    yield daemonsets, host
    daemonsets.close(5)
    assert all(p.poll() is not None for p in host.started), "close() left a plugin running"


def eventually(probe: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 5
    while not probe():
        assert time.monotonic() < deadline, "not within 5 s"
        time.sleep(0.02)


def test_each_plugin_runs_while_the_labels_select_it(stacks: tuple[Labelled, Host]) -> None:
    daemonsets, host = stacks
    time.sleep(0.2)
    assert daemonsets.plugins() == []  # the node not registered yet: nothing runs

    daemonsets.labels = PLUGIN_ON
    eventually(lambda: daemonsets.plugins() == [DEVICE_PLUGIN])
    (device_plugin,) = host.started

    daemonsets.labels = DRA_ON
    eventually(lambda: daemonsets.plugins() == [DRA_PLUGIN])
    assert device_plugin.returncode == -15  # SIGTERM, as the kubelet stops a deleted pod

    # Both selected, as a node mislabelled by hand: both run, as both DaemonSets would.
    daemonsets.labels = BOTH
    eventually(lambda: daemonsets.plugins() == sorted([DEVICE_PLUGIN, DRA_PLUGIN]))
    assert daemonsets.events == [
        f"{DEVICE_PLUGIN} started",
        f"{DEVICE_PLUGIN} stopped",
        f"{DRA_PLUGIN} started",
        f"{DEVICE_PLUGIN} started",
    ]
    assert daemonsets.failed == []


def test_a_plugin_that_exits_is_started_again(stacks: tuple[Labelled, Host]) -> None:
    daemonsets, host = stacks
    daemonsets.labels = PLUGIN_ON
    eventually(lambda: len(host.started) == 1)
    host.started[0].kill()
    eventually(lambda: len(host.started) == 2 and daemonsets.plugins() == [DEVICE_PLUGIN])
    assert daemonsets.events[1] == f"{DEVICE_PLUGIN} exited with -9"
