"""One node's GPU stack moved, in place: cordon, drain its GPU pods through the Eviction API,
switch the labels that choose the device plugin or the DRA driver, wait until the node offers
its GPUs one way only, uncordon. Each step is recorded on the node (app/core/conversion.py)
before the next begins, so that an interrupted conversion resumes where it stopped.

It refuses to start where the result would double-allocate (a pod holding the node's GPUs
that will not leave, such as a DaemonSet's) or strand pods (pods that must stay on the stack
the node leaves, with nothing left of it elsewhere), and it stops, the node still cordoned,
when a step cannot finish in time: never uncordoned while both stacks may hand out its GPUs.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Protocol

from app.core.conversion import ANNOTATION, STEPS, Stack, State, state_of
from app.core.kube import Obj
from app.core.policy import Policy
from app.core.resources import legacy_devices
from app.core.scope import namespace_mode

FINISHED = ("Succeeded", "Failed")


class Cluster(Protocol):
    """What a conversion reads and writes (app/maintain/nodes/cluster.py: the API server)."""

    def node(self, name: str) -> Obj: ...
    def nodes(self) -> list[Obj]: ...
    def pods(self) -> list[Obj]: ...  # every namespace's, not finished
    def namespaces(self) -> list[Obj]: ...
    def dra_devices(self) -> Counter[str]: ...  # node -> devices its slices publish
    def patch_node(self, name: str, patch: Obj) -> None: ...
    def evict(self, namespace: str, name: str) -> str | None: ...  # None: accepted
    def event(self, node: Obj, reason: str, message: str, *, warning: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class Options:
    to: str  # "dra" or "device-plugin"
    stack: Stack
    apply: bool
    timeout: float = 600.0  # seconds for the drain, and again for the wait
    all_pods: bool = False  # drain pods without GPUs too
    poll: float = 2.0


@dataclass(slots=True)
class Outcome:
    node: str
    done: bool = False
    refused: list[str] = field(default_factory=list)
    stuck: list[str] = field(default_factory=list)  # what would not leave or not change


def legacy_allocatable(node: Obj, policy: Policy) -> dict[str, int]:
    """The mapped legacy resources the node offers (the device plugin's)."""
    found = {}
    for resource, value in ((node.get("status") or {}).get("allocatable") or {}).items():
        if policy.mapping_for(str(resource)) is None:
            continue
        try:
            amount = int(str(value))
        except ValueError:
            continue
        if amount:
            found[str(resource)] = amount
    return found


def holds_dra(pod: Obj) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims"))


def _daemon(pod: Obj) -> bool:
    return any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or [])


def _name(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace')}/{pod['metadata'].get('name')}"


@dataclass(frozen=True, slots=True)
class Drain:
    """The node's pods, as the drain sees them."""

    evict: list[Obj]  # to evict
    blocking: list[Obj]  # hold the node's GPUs and will not leave (DaemonSet pods)
    staying: Counter[str]  # legacy devices the evicted pods must find on other nodes


def drain_of(
    node: str, pods: Iterable[Obj], namespaces: Iterable[Obj], policy: Policy, options: Options
) -> Drain:
    modes = {str(n["metadata"]["name"]): namespace_mode(n, policy) for n in namespaces}
    evict: list[Obj] = []
    blocking: list[Obj] = []
    staying: Counter[str] = Counter()
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") != node or (pod.get("status") or {}).get("phase") in FINISHED:
            continue
        legacy = legacy_devices(spec, policy)
        gpu = bool(legacy) or holds_dra(pod)
        if _daemon(pod):
            if gpu:
                blocking.append(pod)
            continue
        if not gpu and not options.all_pods:
            continue
        evict.append(pod)
        # A legacy pod moves to DRA only when recreated in a namespace gpu2dra translates.
        namespace = str(pod["metadata"].get("namespace"))
        if legacy and (options.to == "dra" and modes.get(namespace) != "enabled"):
            staying.update(legacy)
    return Drain(evict, blocking, staying)


def plugin_left_elsewhere(
    node: str, nodes: Iterable[Obj], pods: Iterable[Obj], policy: Policy
) -> Counter[str]:
    """What the device plugin has left on the other schedulable nodes, per legacy resource:
    each node's allocatable less what its pods hold (pods bound to a node that is gone hold
    nothing)."""
    offers = {
        str(n["metadata"]["name"]): Counter(legacy_allocatable(n, policy))
        for n in nodes
        if n["metadata"]["name"] != node and not (n.get("spec") or {}).get("unschedulable")
    }
    for pod in pods:
        spec = pod.get("spec") or {}
        if (on := offers.get(str(spec.get("nodeName")))) is not None:
            on.subtract(legacy_devices(spec, policy))
    left: Counter[str] = Counter()
    for on in offers.values():
        left.update({r: n for r, n in on.items() if n > 0})
    return left


def refusals(node: Obj, cluster: Cluster, policy: Policy, options: Options) -> list[str]:
    """Why this conversion must not start; empty when it may."""
    name = node["metadata"]["name"]
    legacy = legacy_allocatable(node, policy)
    devices = cluster.dra_devices()
    pods = cluster.pods()
    drain = drain_of(name, pods, cluster.namespaces(), policy, options)
    said = []
    if options.to == "dra" and not legacy and devices[name]:
        said.append(f"node {name} already offers its GPUs through DRA only")
    if options.to == "device-plugin" and legacy and not devices[name]:
        said.append(f"node {name} already offers its GPUs through the device plugin only")
    for pod in drain.blocking:
        said.append(
            f"{_name(pod)} (a DaemonSet's pod) holds the node's GPUs and would not leave: "
            "switching stacks under it would hand its GPUs out twice"
        )
    if drain.staying:
        left = plugin_left_elsewhere(name, cluster.nodes(), pods, policy)
        for resource, n in sorted(drain.staying.items()):
            if left[resource] < n:
                said.append(
                    f"the pods drained from {name} that stay on the device plugin (their "
                    f"namespace is not enabled) need {n} {resource}; other nodes have "
                    f"{max(0, left[resource])} left: they would stay Pending"
                )
    if options.to == "device-plugin":
        moving = [p for p in drain.evict if holds_dra(p)]
        schedulable = {
            n["metadata"]["name"]
            for n in cluster.nodes()
            if not (n.get("spec") or {}).get("unschedulable")
        }
        elsewhere = sum(n for other, n in devices.items() if other != name and other in schedulable)
        if moving and not elsewhere:
            said.append(
                f"{len(moving)} pod(s) on {name} hold DRA devices and no other schedulable node "
                "publishes any: they would stay Pending"
            )
    return said


class Converter:
    """Runs the steps for one node, saying each on `say`."""

    def __init__(
        self,
        cluster: Cluster,
        policy: Policy,
        options: Options,
        say: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cluster, self.policy, self.options, self.say = cluster, policy, options, say
        self.clock, self.sleep = clock, sleep

    def run(self, name: str) -> Outcome:
        outcome = Outcome(name)
        node = self.cluster.node(name)
        state = state_of(node)
        if state is not None and state.to != self.options.to:
            outcome.refused.append(
                f"node {name} is mid-conversion to {state.to} ({state.done or 'not started'}): "
                f"finish it{' with --revert' if state.to == 'device-plugin' else ''} first"
            )
            return outcome
        if state is None:
            outcome.refused = refusals(node, self.cluster, self.policy, self.options)
            if outcome.refused:
                return outcome
            unschedulable = bool((node.get("spec") or {}).get("unschedulable"))
            state = State(
                self.options.to,
                "",
                self.options.stack.name,
                datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                was_cordoned=unschedulable,
            )
        else:
            self.say(f"{name}: resuming after {state.done or 'the start'}")
        steps = {
            "cordon": self._cordon,
            "drain": self._drain,
            "switch": self._switch,
            "wait": self._wait,
            "uncordon": self._uncordon,
        }
        assert tuple(steps) == STEPS
        for step in state.next_steps:
            if not self.options.apply:
                self.say(f"{name}: {step}: {self._would(step, node)}")
                continue
            stuck = steps[step](node, state)
            if stuck:
                outcome.stuck = stuck
                self.say(f"{name}: {step}: stopped; the node stays cordoned")
                return outcome
            state = replace(state, done=step)
            if step != "uncordon":
                self._record(node, state)
        outcome.done = True
        return outcome

    # ---- the steps: each returns what kept it from finishing ------------------------------

    def _cordon(self, node: Obj, state: State) -> list[str]:
        name = node["metadata"]["name"]
        self.cluster.patch_node(name, {"spec": {"unschedulable": True}})
        self._record(node, state)
        self._tell(node, "Cordoned", f"cordoned to move its GPUs to {self._target()}")
        return []

    def _drain(self, node: Obj, state: State) -> list[str]:
        name = node["metadata"]["name"]
        deadline = self.clock() + self.options.timeout
        waiting: dict[str, Obj] = {}
        refused: dict[str, str] = {}
        while True:
            drain = drain_of(
                name, self.cluster.pods(), self.cluster.namespaces(), self.policy, self.options
            )
            left = {_name(p): p for p in drain.evict}
            for key, pod in left.items():
                if key in waiting or pod["metadata"].get("deletionTimestamp"):
                    continue
                meta = pod["metadata"]
                why = self.cluster.evict(str(meta["namespace"]), str(meta["name"]))
                if why is None:
                    waiting[key] = pod
                    refused.pop(key, None)
                    self.say(f"{name}: drain: {key} evicted")
                elif refused.get(key) != why:
                    refused[key] = why
                    self.say(f"{name}: drain: {key} not yet: {why}")
            if not left:
                self._tell(node, "Drained", "its GPU pods evicted")
                return []
            if self.clock() >= deadline:
                stuck = [
                    f"{key}: {refused.get(key) or 'evicted, still terminating'}" for key in left
                ]
                self._tell(node, "DrainStuck", f"{len(stuck)} pod(s) did not leave", warn=True)
                return stuck
            self.sleep(self.options.poll)

    def _switch(self, node: Obj, state: State) -> list[str]:
        name = node["metadata"]["name"]
        labels = self.options.stack.labels(self.options.to)
        self.cluster.patch_node(name, {"metadata": {"labels": labels}})
        said = ", ".join(f"{k}={v}" if v is not None else f"{k}-" for k, v in labels.items())
        self.say(f"{name}: switch: {said}")
        self._tell(node, "StackSwitched", f"labels {said}")
        return []

    def _wait(self, node: Obj, state: State) -> list[str]:
        name = node["metadata"]["name"]
        deadline = self.clock() + self.options.timeout
        while True:
            legacy = legacy_allocatable(self.cluster.node(name), self.policy)
            devices = self.cluster.dra_devices()[name]
            offered = ", ".join(f"{r}={n}" for r, n in legacy.items()) or "no device-plugin GPU"
            if self.options.to == "dra" and not legacy and devices:
                self.say(f"{name}: wait: {offered}, {devices} DRA device(s) published")
                self._tell(node, "StackReady", f"{devices} DRA device(s), no device-plugin GPU")
                return []
            if self.options.to == "device-plugin" and legacy and not devices:
                self.say(f"{name}: wait: {offered}, no DRA device published")
                self._tell(node, "StackReady", f"{offered}, no DRA device")
                return []
            if self.clock() >= deadline:
                stuck = [f"after {self.options.timeout:.0f}s: {offered}, {devices} DRA device(s)"]
                self._tell(node, "StackNotReady", stuck[0], warn=True)
                return stuck
            self.sleep(self.options.poll)

    def _uncordon(self, node: Obj, state: State) -> list[str]:
        name = node["metadata"]["name"]
        patch: Obj = {"metadata": {"annotations": {ANNOTATION: None}}}
        if not state.was_cordoned:
            patch["spec"] = {"unschedulable": None}
        self.cluster.patch_node(name, patch)
        kept = " (it was cordoned before: kept so)" if state.was_cordoned else ""
        self._tell(node, "Converted", f"its GPUs are offered through {self._target()}{kept}")
        self.say(f"{name}: done: its GPUs are offered through {self._target()}{kept}")
        return []

    # ---- helpers ------------------------------------------------------------------------------

    def _target(self) -> str:
        return "the DRA driver" if self.options.to == "dra" else "the device plugin"

    def _record(self, node: Obj, state: State) -> None:
        patch = {"metadata": {"annotations": {ANNOTATION: state.text()}}}
        self.cluster.patch_node(node["metadata"]["name"], patch)

    def _tell(self, node: Obj, reason: str, message: str, *, warn: bool = False) -> None:
        self.cluster.event(node, f"Gpu2dra{reason}", message, warning=warn)

    def _would(self, step: str, node: Obj) -> str:
        name = node["metadata"]["name"]
        if step == "drain":
            drain = drain_of(
                name, self.cluster.pods(), self.cluster.namespaces(), self.policy, self.options
            )
            pods = ", ".join(_name(p) for p in drain.evict) or "none"
            return f"would evict {len(drain.evict)} pod(s): {pods}"
        if step == "switch":
            labels = self.options.stack.labels(self.options.to)
            return "would set " + ", ".join(
                f"{k}={v}" if v is not None else f"{k}-" for k, v in labels.items()
            )
        if step == "wait":
            return f"would wait for the node to offer its GPUs through {self._target()} only"
        return f"would {step} the node"
