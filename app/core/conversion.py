"""A node's GPU stack, moved between the device plugin and the DRA driver (`gpu2dra nodes`):
the labels that choose each stack, the steps of a conversion, and the state a conversion keeps
on the node (an annotation) so that it can resume and so that doctor and report can say a node
is mid-conversion. Pure."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from app.core.kube import Obj

ANNOTATION = "gpu2dra.io/conversion"
STEPS = ("cordon", "drain", "switch", "wait", "uncordon")
TARGETS = ("dra", "device-plugin")


@dataclass(frozen=True, slots=True)
class Stack:
    """Which node labels run which GPU stack: `value` None removes the label."""

    name: str
    plugin_on: dict[str, str | None]  # the device plugin runs (and the DRA driver does not)
    dra_on: dict[str, str | None]  # the DRA driver runs (and the device plugin does not)

    def labels(self, to: str) -> dict[str, str | None]:
        return dict(self.dra_on if to == "dra" else self.plugin_on)


# The DRA driver chart (dra-driver-nvidia-gpu) selects nodes by NFD's PCI labels by default:
# give its kubeletPlugin.nodeSelector this label, so that it runs only where it is set.
DRA_LABEL = "nvidia.com/dra-driver.deploy"
PRESETS = {
    # The GPU Operator runs the device plugin unless the node says otherwise.
    "gpu-operator": Stack(
        "gpu-operator",
        plugin_on={"nvidia.com/gpu.deploy.device-plugin": "true", DRA_LABEL: None},
        dra_on={"nvidia.com/gpu.deploy.device-plugin": "false", DRA_LABEL: "true"},
    ),
    # The standalone device plugin chart with nodeSelector {nvidia.com/device-plugin.deploy:
    # "true"}, and the DRA driver chart as above.
    "standalone": Stack(
        "standalone",
        plugin_on={"nvidia.com/device-plugin.deploy": "true", DRA_LABEL: None},
        dra_on={"nvidia.com/device-plugin.deploy": None, DRA_LABEL: "true"},
    ),
}


def parse_labels(texts: list[str]) -> dict[str, str | None]:
    """`KEY=VALUE` sets, `KEY-` removes (kubectl label's spelling)."""
    found: dict[str, str | None] = {}
    for text in texts:
        if text.endswith("-") and "=" not in text:
            found[text[:-1]] = None
        elif "=" in text:
            key, _, value = text.partition("=")
            found[key] = value
        else:
            raise ValueError(f"{text!r}: write KEY=VALUE, or KEY- to remove it")
        if not text.strip("=-"):
            raise ValueError(f"{text!r}: a label needs a key")
    return found


@dataclass(frozen=True, slots=True)
class State:
    """What a conversion in progress has done to a node."""

    to: str  # "dra" or "device-plugin"
    done: str  # the last step done ("" before the first)
    stack: str  # the preset or "custom"
    started: str  # RFC 3339
    was_cordoned: bool = False  # cordoned before the conversion: left cordoned after it

    def text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))

    @property
    def next_steps(self) -> tuple[str, ...]:
        return STEPS[STEPS.index(self.done) + 1 :] if self.done in STEPS else STEPS


def state_of(node: Obj) -> State | None:
    """The node's conversion in progress, None when there is none (or the annotation is not
    one gpu2dra could have written: then the node is treated as not mid-conversion)."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION)
    if not text:
        return None
    try:
        raw = json.loads(text)
        state = State(
            str(raw["to"]),
            str(raw["done"]),
            str(raw["stack"]),
            str(raw["started"]),
            raw.get("was_cordoned") is True,
        )
    except (ValueError, KeyError, TypeError):
        return None
    if state.to not in TARGETS or (state.done and state.done not in STEPS):
        return None
    return state


def describe(state: State) -> str:
    """For doctor and report: where a node's conversion stands."""
    target = "the DRA driver" if state.to == "dra" else "the device plugin"
    after = f"after {state.done}" if state.done else "not started"
    return f"converting to {target} ({after}, since {state.started})"
