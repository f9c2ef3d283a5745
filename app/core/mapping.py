"""One mapping of the policy: how a legacy extended resource becomes a DRA device request
(its DeviceClass, selectors, the node labels that may become selectors, the in-tree choice,
and how shared GPUs stay shared), read and checked from the policy file."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, get_args

# Which GPU Feature Discovery node labels can be turned into selectors for a mapping:
# "gpu" devices are whole GPUs (product, family, memory); "mig" devices are slices of a GPU
# (they carry the parent's product and family, but their memory is the slice's); "none".
NodeLabels = Literal["gpu", "mig", "none"]
# Where a DeviceClass serves the resource in-tree (extendedResourceName, KEP-5004): leave the
# pods that gain nothing from translation to it, or translate every pod as elsewhere.
InTree = Literal["defer", "translate"]


class PolicyError(ValueError):
    """The policy file is not valid; the message says where."""


@dataclass(frozen=True, slots=True)
class Consumable:
    """How a mapping's shared GPUs become consumable capacity of devices several claims share."""

    shares: int = 1  # the `shares` one device-plugin replica takes; 0: time-sliced pods stay
    memory: str = ""  # HAMi's memory resource (MiB) that becomes capacity `memory`; "": none
    driver: str = "gpu.nvidia.com"  # the domain of the capacities (the DRA driver's name)


@dataclass(frozen=True, slots=True)
class ResourceMapping:
    """How one legacy extended resource becomes a DRA device request."""

    resource: str  # exact name, or a prefix ending in `*` that captures a MIG profile
    device_class: str
    selectors: tuple[str, ...] = ()
    node_labels: NodeLabels = "gpu"
    in_tree: InTree = "defer"
    # The driver's sharing settings (GpuSharing as canonical JSON) given to claims of pods
    # that asked for shared GPUs; "" refuses to translate them (they would become exclusive).
    sharing: str = ""
    # Shared GPUs as DRA consumable capacity (KEP-5075): pods keep sharing devices with other
    # pods. None: not (`sharing` decides).
    consumable: Consumable | None = None

    @property
    def is_pattern(self) -> bool:
        return self.resource.endswith("*")

    @property
    def takes_shares(self) -> bool:
        """Pods on shared GPUs move onto the capacity `shares` of devices claims share."""
        return self.consumable is not None and self.consumable.shares > 0


def expect(cond: bool, where: str, what: str) -> None:
    if not cond:
        raise PolicyError(f"{where}: {what}")


def parse_mapping(resource: Any, raw: Any) -> ResourceMapping:
    where = f"mappings[{resource!r}]"
    expect(isinstance(resource, str) and "/" in resource, where, "key must be a resource name")
    expect(isinstance(raw, dict), where, "must be a map")
    unknown = set(raw) - {
        "deviceClassName",
        "selectors",
        "nodeLabels",
        "inTree",
        "sharing",
        "consumable",
    }
    expect(not unknown, where, f"unknown field(s): {', '.join(sorted(unknown))}")
    device_class = raw.get("deviceClassName")
    expect(isinstance(device_class, str) and bool(device_class), where, "needs deviceClassName")
    selectors = raw.get("selectors", [])
    expect(
        isinstance(selectors, list) and all(isinstance(s, str) and s for s in selectors),
        where,
        "selectors must be a list of CEL expressions",
    )
    expect(
        "*" not in resource[:-1],
        where,
        "`*` may only end the resource name",
    )
    default_labels = "mig" if resource.endswith("*") else "gpu"
    node_labels = raw.get("nodeLabels", default_labels)
    expect(
        node_labels in get_args(NodeLabels),
        f"{where}.nodeLabels",
        f"must be one of {', '.join(get_args(NodeLabels))}, not {node_labels!r}",
    )
    in_tree = raw.get("inTree", "defer")
    expect(
        in_tree in get_args(InTree),
        f"{where}.inTree",
        f"must be one of {', '.join(get_args(InTree))}, not {in_tree!r}",
    )
    sharing = _sharing(raw.get("sharing", "refuse"), f"{where}.sharing")
    consumable = _consumable(raw.get("consumable"), f"{where}.consumable")
    if consumable is not None:
        expect(not sharing, where, "give `sharing` or `consumable`, not both")
        expect(
            not resource.endswith("*") and node_labels == "gpu",
            f"{where}.consumable",
            "is for whole-GPU mappings (nodeLabels: gpu, no `*`)",
        )
        expect(consumable.memory != resource, f"{where}.consumable.memory", "is the GPU itself")
    return ResourceMapping(
        resource,
        device_class,
        tuple(selectors),
        node_labels,
        in_tree=in_tree,
        sharing=sharing,
        consumable=consumable,
    )


def _consumable(raw: Any, where: str) -> Consumable | None:
    """None (absent), or `{shares: N|none, memory: <resource>|none, driver: <name>}`."""
    if raw is None:
        return None
    expect(isinstance(raw, dict), where, "must be a map (shares, memory, driver)")
    unknown = set(raw) - {"shares", "memory", "driver"}
    expect(not unknown, where, f"unknown field(s): {', '.join(sorted(unknown))}")
    shares = raw.get("shares", 1)
    shares = 0 if shares == "none" else shares
    expect(
        isinstance(shares, int) and not isinstance(shares, bool) and 0 <= shares <= 1024,
        f"{where}.shares",
        f"must be none or the shares one replica takes (1 to 1024), not {shares!r}",
    )
    memory = raw.get("memory", "none")
    memory = "" if memory == "none" else memory
    expect(
        isinstance(memory, str) and (not memory or "/" in memory),
        f"{where}.memory",
        f"must be none or a resource name (nvidia.com/gpumem), not {memory!r}",
    )
    driver = raw.get("driver", "gpu.nvidia.com")
    expect(isinstance(driver, str) and bool(driver), f"{where}.driver", "must be a driver name")
    expect(bool(shares or memory), where, "shares and memory are both none: nothing to share")
    return Consumable(shares, memory, driver)


_STRATEGIES = ("TimeSlicing", "MPS")
_STRATEGY_CONFIG = {"TimeSlicing": "timeSlicingConfig", "MPS": "mpsConfig"}


def _sharing(raw: Any, where: str) -> str:
    """`refuse`, a strategy name, or the driver's GpuSharing map; as canonical JSON."""
    if raw == "refuse":
        return ""
    if isinstance(raw, str):
        raw = {"strategy": raw}
    expect(isinstance(raw, dict), where, "must be refuse, TimeSlicing, MPS or a map")
    strategy = raw.get("strategy")
    expect(strategy in _STRATEGIES, where, f"strategy must be one of {', '.join(_STRATEGIES)}")
    config_key = _STRATEGY_CONFIG[strategy]
    unknown = set(raw) - {"strategy", config_key}
    expect(not unknown, where, f"unknown field(s) for {strategy}: {', '.join(sorted(unknown))}")
    config = raw.get(config_key, {"interval": "Default"} if strategy == "TimeSlicing" else {})
    expect(isinstance(config, dict), where, f"{config_key} must be a map")
    return json.dumps({"strategy": strategy, config_key: config}, sort_keys=True)
