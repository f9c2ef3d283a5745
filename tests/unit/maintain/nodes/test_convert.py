"""A node's conversion against a cluster in memory: the steps in order, each recorded on the
node; the drain through evictions only, waiting out a PodDisruptionBudget; the refusals that
keep GPUs from being handed out twice or pods from being stranded; a stop that leaves the node
cordoned, and the resume after it; a dry run that writes nothing. On the real control plane:
tests/e2e/test_nodes.py."""

from __future__ import annotations

from collections import Counter
from typing import Any

from app.core.conversion import ANNOTATION, PRESETS, State, parse_labels, state_of
from app.core.kube import Obj
from app.core.policy import load_policy
from app.maintain.nodes.convert import Converter, Options

POLICY = load_policy(None)
DRA_ON = PRESETS["gpu-operator"].dra_on


def node(name: str, gpus: int = 0, **labels: str) -> Obj:
    allocatable = {"cpu": "8"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    return {
        "metadata": {"name": name, "labels": dict(labels), "annotations": {}},
        "spec": {},
        "status": {"allocatable": allocatable},
    }


def pod(name: str, on: str, gpus: int = 1, namespace: str = "team", **extra: Any) -> Obj:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {
        "metadata": {"name": name, "namespace": namespace, **extra},
        "spec": {"nodeName": on, "containers": [{"name": "c", "resources": {"limits": limits}}]},
        "status": {"phase": "Running"},
    }


def namespace(name: str, mode: str | None) -> Obj:
    labels = {"gpu2dra.io/migration": mode} if mode else {}
    return {"metadata": {"name": name, "labels": labels}}


class Memory:
    """A cluster whose device plugin and DRA driver follow the node's labels at once, and
    whose evicted pods are gone at once unless a PDB holds them."""

    def __init__(self, nodes: list[Obj], pods: list[Obj], namespaces: list[Obj]) -> None:
        self.by_name = {n["metadata"]["name"]: n for n in nodes}
        self.live = pods
        self.spaces = namespaces
        self.gpus = {
            n: int(v["status"]["allocatable"].get("nvidia.com/gpu", 0))
            for n, v in self.by_name.items()
        }
        self.published: Counter[str] = Counter()
        self.held: set[str] = set()  # pods a PDB keeps
        self.writes: list[tuple[str, Any]] = []
        self.events: list[str] = []
        self.follow = True

    def node(self, name: str) -> Obj:
        return self.by_name[name]

    def nodes(self) -> list[Obj]:
        return list(self.by_name.values())

    def pods(self) -> list[Obj]:
        return list(self.live)

    def namespaces(self) -> list[Obj]:
        return self.spaces

    def dra_devices(self) -> Counter[str]:
        return Counter(self.published)

    def patch_node(self, name: str, patch: Obj) -> None:
        self.writes.append((name, patch))
        n = self.by_name[name]
        for key, value in (patch.get("metadata") or {}).get("labels", {}).items():
            if value is None:
                n["metadata"]["labels"].pop(key, None)
            else:
                n["metadata"]["labels"][key] = value
        for key, value in (patch.get("metadata") or {}).get("annotations", {}).items():
            if value is None:
                n["metadata"]["annotations"].pop(key, None)
            else:
                n["metadata"]["annotations"][key] = value
        if "spec" in patch:
            n["spec"]["unschedulable"] = patch["spec"]["unschedulable"]
        if self.follow:
            labels = n["metadata"]["labels"]
            on_dra = labels.get("nvidia.com/dra-driver.deploy") == "true"
            allocatable = n["status"]["allocatable"]
            if on_dra:
                allocatable.pop("nvidia.com/gpu", None)
                self.published[name] = self.gpus[name]
            else:
                allocatable["nvidia.com/gpu"] = str(self.gpus[name])
                self.published.pop(name, None)

    def evict(self, namespace: str, name: str) -> str | None:
        self.writes.append(("evict", f"{namespace}/{name}"))
        if name in self.held:
            return "its PodDisruptionBudget allows no disruption now"
        self.live = [p for p in self.live if p["metadata"]["name"] != name]
        return None

    def event(self, node: Obj, reason: str, message: str, *, warning: bool) -> None:
        self.events.append(reason)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def converter(
    cluster: Memory,
    *,
    apply: bool = True,
    to: str = "dra",
    timeout: float = 10,
    on_sleep: Any = None,
) -> tuple[Converter, list[str], Clock]:
    said: list[str] = []
    clock = Clock()

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        if on_sleep:
            on_sleep(clock.now)

    options = Options(to=to, stack=PRESETS["gpu-operator"], apply=apply, timeout=timeout, poll=1)
    return Converter(cluster, POLICY, options, said.append, clock=clock, sleep=sleep), said, clock


def test_a_node_converts_step_by_step() -> None:
    cluster = Memory(
        [node("a", 2), node("b", 4)],
        [pod("p1", "a"), pod("p2", "a", namespace="other"), pod("web", "a", gpus=0)],
        [namespace("team", "enabled"), namespace("other", None)],
    )
    run, said, _ = converter(cluster)
    outcome = run.run("a")
    assert outcome.done and not outcome.refused and not outcome.stuck
    a = cluster.node("a")
    assert a["metadata"]["labels"] == {
        "nvidia.com/gpu.deploy.device-plugin": "false",
        "nvidia.com/dra-driver.deploy": "true",
    }
    assert ANNOTATION not in a["metadata"]["annotations"]
    assert a["spec"]["unschedulable"] is None  # uncordoned
    assert [w for w in cluster.writes if w[0] == "evict"] == [
        ("evict", "team/p1"),
        ("evict", "other/p2"),
    ]  # the pod without GPUs stays
    assert cluster.events == [
        "Gpu2draCordoned",
        "Gpu2draDrained",
        "Gpu2draStackSwitched",
        "Gpu2draStackReady",
        "Gpu2draConverted",
    ]
    assert said[-1] == "a: done: its GPUs are offered through the DRA driver"


def test_each_step_is_recorded_before_the_next() -> None:
    cluster = Memory([node("a", 2), node("b", 2)], [], [namespace("team", "enabled")])
    run, _, _ = converter(cluster)
    run.run("a")
    recorded = [
        state_of({"metadata": {"annotations": {ANNOTATION: a}}})
        for _, patch in cluster.writes
        if isinstance(patch, dict)
        and (a := (patch.get("metadata") or {}).get("annotations", {}).get(ANNOTATION))
    ]
    assert [s.done for s in recorded if s] == ["", "cordon", "drain", "switch", "wait"]


def test_a_pdb_is_waited_out_and_then_stops_the_conversion_cordoned() -> None:
    cluster = Memory([node("a", 2), node("b", 2)], [pod("p1", "a")], [namespace("team", "enabled")])
    cluster.held.add("p1")
    run, said, _ = converter(cluster, timeout=5)
    outcome = run.run("a")
    assert not outcome.done
    assert outcome.stuck == ["team/p1: its PodDisruptionBudget allows no disruption now"]
    a = cluster.node("a")
    assert a["spec"]["unschedulable"] is True
    assert state_of(a) is not None and state_of(a).done == "cordon"  # type: ignore[union-attr]
    assert "nvidia.com/dra-driver.deploy" not in a["metadata"]["labels"]  # never switched
    assert "Gpu2draDrainStuck" in cluster.events
    # The budget allows it later: the same command resumes after the cordon.
    cluster.held.clear()
    run, said, _ = converter(cluster)
    assert run.run("a").done
    assert said[0] == "a: resuming after cordon"
    assert cluster.node("a")["metadata"]["labels"]["nvidia.com/dra-driver.deploy"] == "true"


def test_a_stack_that_does_not_change_stops_before_uncordon() -> None:
    cluster = Memory([node("a", 2), node("b", 2)], [], [namespace("team", "enabled")])
    cluster.follow = False  # no DaemonSet follows the labels
    run, _, _ = converter(cluster, timeout=3)
    outcome = run.run("a")
    assert not outcome.done
    assert outcome.stuck == ["after 3s: nvidia.com/gpu=2, 0 DRA device(s)"]
    assert cluster.node("a")["spec"]["unschedulable"] is True
    assert state_of(cluster.node("a")).done == "switch"  # type: ignore[union-attr]


def test_a_daemonsets_gpu_pod_refuses_the_conversion() -> None:
    daemon = pod("agent", "a", ownerReferences=[{"kind": "DaemonSet", "name": "agent"}])
    cluster = Memory([node("a", 2), node("b", 2)], [daemon], [namespace("team", "enabled")])
    run, _, _ = converter(cluster)
    outcome = run.run("a")
    assert not outcome.done and cluster.writes == []
    assert outcome.refused == [
        "team/agent (a DaemonSet's pod) holds the node's GPUs and would not leave: switching "
        "stacks under it would hand its GPUs out twice"
    ]


def test_pods_that_must_stay_need_room_on_the_device_plugin_elsewhere() -> None:
    cluster = Memory(
        [node("a", 2), node("b", 1)],
        [
            pod("p1", "a", namespace="other"),
            pod("p2", "a", namespace="other"),
            pod("q", "b", namespace="other"),
        ],
        [namespace("other", "audit")],
    )
    run, _, _ = converter(cluster)
    outcome = run.run("a")
    assert cluster.writes == []
    assert outcome.refused == [
        "the pods drained from a that stay on the device plugin (their namespace is not "
        "enabled) need 2 nvidia.com/gpu; other nodes have 0 left: they would stay Pending"
    ]


def test_a_dry_run_writes_nothing_and_says_each_step() -> None:
    cluster = Memory([node("a", 2), node("b", 2)], [pod("p1", "a")], [namespace("team", "enabled")])
    run, said, _ = converter(cluster, apply=False)
    assert run.run("a").done
    assert cluster.writes == [] and cluster.events == []
    assert said == [
        "a: cordon: would cordon the node",
        "a: drain: would evict 1 pod(s): team/p1",
        "a: switch: would set nvidia.com/gpu.deploy.device-plugin=false, "
        "nvidia.com/dra-driver.deploy=true",
        "a: wait: would wait for the node to offer its GPUs through the DRA driver only",
        "a: uncordon: would uncordon the node",
    ]


def test_revert_goes_back_and_a_node_already_there_is_refused() -> None:
    cluster = Memory([node("a", 2), node("b", 2)], [], [namespace("team", "enabled")])
    run, _, _ = converter(cluster)
    assert run.run("a").done
    again, _, _ = converter(cluster)
    assert again.run("a").refused == ["node a already offers its GPUs through DRA only"]
    back, _, _ = converter(cluster, to="device-plugin")
    assert back.run("a").done
    a = cluster.node("a")
    assert a["status"]["allocatable"]["nvidia.com/gpu"] == "2" and not cluster.published["a"]
    assert a["metadata"]["labels"]["nvidia.com/gpu.deploy.device-plugin"] == "true"


def test_a_conversion_the_other_way_in_progress_is_refused() -> None:
    cluster = Memory([node("a", 2)], [], [])
    cluster.node("a")["metadata"]["annotations"][ANNOTATION] = State(
        "device-plugin", "cordon", "gpu-operator", "2026-12-04T00:00:00Z"
    ).text()
    run, _, _ = converter(cluster)
    assert run.run("a").refused == [
        "node a is mid-conversion to device-plugin (cordon): finish it with --revert first"
    ]


def test_a_node_cordoned_before_stays_cordoned() -> None:
    cluster = Memory([node("a", 2), node("b", 2)], [], [])
    cluster.node("a")["spec"]["unschedulable"] = True
    run, said, _ = converter(cluster)
    assert run.run("a").done
    assert cluster.node("a")["spec"]["unschedulable"] is True
    assert said[-1].endswith("(it was cordoned before: kept so)")


def test_labels_are_written_as_kubectl_label_writes_them() -> None:
    assert parse_labels(["a=b", "c-", "d="]) == {"a": "b", "c": None, "d": ""}
    for bad in ("nokey", "=", "-"):
        try:
            parse_labels([bad])
        except ValueError:
            continue
        raise AssertionError(bad)
    assert DRA_ON["nvidia.com/dra-driver.deploy"] == "true"


def test_pods_bound_to_a_node_that_is_gone_take_no_room_elsewhere() -> None:
    """A pod of a deleted node still names it: it holds none of another node's GPUs."""
    cluster = Memory(
        [node("a", 2), node("b", 1)],
        [pod("p1", "a", namespace="other"), pod("ghost", "gone", gpus=4, namespace="other")],
        [namespace("other", "audit")],
    )
    run, _, _ = converter(cluster)
    assert run.run("a").done
