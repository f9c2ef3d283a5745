"""Fail closed: what gpu2dra does not understand about a pod that can change which GPUs it
gets leaves the pod as it is, with a warning that names it.

Besides the containers' resources, three things say which GPUs a pod gets: the annotations a
GPU scheduler reads (HAMi's), node terms on GPU vendor labels (nvidia/gfd.py) and the scheduler
itself. This module reads the first and the last; what it cannot translate it names.
Rules and sources: docs/concepts/translation.md#fail-closed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from app.core.nvidia.gfd_cel import quote_cel
from app.core.outcomes import Code, Finding
from app.core.policy import Policy

# HAMi's device selection annotations (Project-HAMi/HAMi pkg/device/nvidia/device.go; the
# matching is pkg/device/devices.go CheckType and CheckUUID).
USE_TYPE = "nvidia.com/use-gputype"
NOUSE_TYPE = "nvidia.com/nouse-gputype"
USE_UUID = "nvidia.com/use-gpuuuid"
NOUSE_UUID = "nvidia.com/nouse-gpuuuid"
SELECTING = (USE_TYPE, NOUSE_TYPE, USE_UUID, NOUSE_UUID)

DEFAULT_SCHEDULER = "default-scheduler"  # what the API server sets an unset schedulerName to

# YuniKorn's admission controller (apache/yunikorn-k8shim pkg/admission/admission_controller.go,
# processPod) sets schedulerName: yunikorn on every pod created in a namespace it processes,
# whatever the pod asked for, and its webhook (yunikorn-admission-controller-mutations) is
# called after gpu2dra's, whose configuration name sorts first. So at admission a pod YuniKorn
# will schedule may still name the default scheduler: it is told by what marks it for YuniKorn,
# a label or annotation of YuniKorn's domain (its queue, its application ID, the user.info the
# controller writes into workloads' pod templates) or the `queue` label the shim also reads
# (pkg/common/constants/constants.go, QueueLabelKeys).
YUNIKORN = "yunikorn"
YUNIKORN_DOMAIN = "yunikorn.apache.org/"
YUNIKORN_LABELS = ("queue",)

_ATTR = "device.attributes['gpu.nvidia.com']"
_NAME = f"{_ATTR}.productName"
# HAMi's card type is NVML's device name, `NVIDIA-` put before one that does not start with
# NVIDIA (pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go); the DRA driver's
# productName is NVML's device name as it is. CheckType upper-cases both sides.
_CARD = f"({_NAME}.startsWith('NVIDIA') ? {_NAME} : 'NVIDIA-' + {_NAME}).upperAscii()"
_SPACE = " \t\n\v\f\r"  # Go's strings.TrimSpace, on ASCII text


Annotations = tuple[tuple[str, Any], ...]


def watched_annotations(annotations: Any, policy: Policy) -> Annotations:
    """The pod's annotations in a watched domain that the policy does not ignore, by key:
    all that translate() reads of the annotations, and so all the memo keeps of them."""
    if not isinstance(annotations, Mapping) or not annotations:
        return ()
    found = [(k, v) for k, v in annotations.items() if isinstance(k, str) and policy.watches(k)]
    return tuple(sorted(found)) if len(found) > 1 else tuple(found)


class DeviceFilter(NamedTuple):
    """What the annotations ask of whole GPUs, and why the pod is left, if it is."""

    selectors: tuple[str, ...]  # CEL, for every whole-GPU request
    problems: tuple[Finding, ...]


def _entries(value: str) -> list[str]:
    """The comma list as CheckType and CheckUUID read it: each entry trimmed, empty ones
    dropped (they match no device), each once."""
    return list(dict.fromkeys(e for e in (p.strip(_SPACE) for p in value.split(",")) if e))


def device_filter(annotations: Annotations) -> DeviceFilter:
    """The CEL selectors HAMi's device selection annotations become; every other watched
    annotation is a problem."""
    selectors: list[str] = []
    problems: list[Finding] = []
    for key, value in annotations:
        if key not in SELECTING:
            problems.append(Finding(Code.ANNOTATION, key=key))
            continue
        if not isinstance(value, str):
            problems.append(Finding(Code.ANNOTATION_VALUE, key=key, why="is not a string"))
            continue
        entries = _entries(value)
        if not value.isascii() or not all(e.isprintable() for e in entries):
            # Go's ToUpper and TrimSpace differ from CEL's upperAscii beyond ASCII.
            why = "holds characters outside printable ASCII"
            problems.append(Finding(Code.ANNOTATION_VALUE, key=key, why=why))
            continue
        if not value.strip(_SPACE):
            continue  # HAMi: an empty value is no constraint
        if not entries:
            if key in (USE_TYPE, USE_UUID):
                why = f"{value!r} names no GPU: HAMi picks none"
                problems.append(Finding(Code.ANNOTATION_VALUE, key=key, why=why))
            continue
        if key in (USE_TYPE, NOUSE_TYPE):
            test = " || ".join(f"{_CARD}.contains({quote_cel(e.upper())})" for e in entries)
            guard = f"'productName' in {_ATTR}"
        else:
            test = f"{_ATTR}.uuid in [{', '.join(map(quote_cel, entries))}]"
            guard = f"'uuid' in {_ATTR}"
        if key in (NOUSE_TYPE, NOUSE_UUID):
            test = f"!({test})"
        elif len(entries) > 1 and key == USE_TYPE:
            test = f"({test})"
        # A device whose name or UUID cannot be read is never picked, under nouse- too.
        selectors.append(f"({guard} && {test})")
    return DeviceFilter(tuple(selectors), tuple(problems))


def yunikorn_mark(metadata: Any) -> str | None:
    """What in a pod's (or pod template's) metadata marks it for YuniKorn, in words ("label
    queue, annotation yunikorn.apache.org/user.info"); None when nothing does. Keys only: their
    values (a user's name, an application ID) say nothing of the pod's GPUs."""
    if not isinstance(metadata, Mapping) or not _marked(metadata):
        return None
    marks = []
    for field, word in (("labels", "label"), ("annotations", "annotation")):
        found = metadata.get(field)
        if not isinstance(found, Mapping):
            continue
        for key in sorted(k for k in found if isinstance(k, str)):
            if key.startswith(YUNIKORN_DOMAIN) or (field == "labels" and key in YUNIKORN_LABELS):
                marks.append(f"{word} {key}")
    return ", ".join(marks) or None


def _marked(metadata: Mapping[str, Any]) -> bool:
    """Whether any key marks the pod for YuniKorn: on every pod's admission, so one pass over
    the keys, nothing sorted or built unless one does."""
    labels, annotations = metadata.get("labels"), metadata.get("annotations")
    if isinstance(labels, Mapping):
        for key in labels:
            if isinstance(key, str) and (key in YUNIKORN_LABELS or key.startswith(YUNIKORN_DOMAIN)):
                return True
    if isinstance(annotations, Mapping):
        for key in annotations:
            if isinstance(key, str) and key.startswith(YUNIKORN_DOMAIN):
                return True
    return False


def scheduler_problem(
    spec: Mapping[str, Any], policy: Policy, yunikorn: str | None = None
) -> Finding | None:
    """Why the pod's scheduler may not allocate DRA claims; None when it is one that does.
    `yunikorn`: what marks the pod for YuniKorn (yunikorn_mark), which then schedules it
    whatever its spec says."""
    name = spec.get("schedulerName")
    name = DEFAULT_SCHEDULER if name is None or name == "" else name
    known = ", ".join(sorted(policy.dra_schedulers))
    if not (isinstance(name, str) and name in policy.dra_schedulers):
        return Finding(Code.SCHEDULER, name=name, known=known)
    if yunikorn is not None and YUNIKORN not in policy.dra_schedulers:
        return Finding(Code.YUNIKORN_POD, how=yunikorn, known=known)
    return None
