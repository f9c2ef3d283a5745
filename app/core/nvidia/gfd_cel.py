"""One GPU Feature Discovery node requirement -> the CEL selector that asks the same of a device.

GFD labels a node with facts about its GPUs; the NVIDIA DRA driver publishes many of the same
facts as device attributes and capacities. Only a label whose value the driver publishes
exactly is turned into CEL; for anything else gfd.py leaves the pod as it is (fail closed).

Every selector that reads a capacity or a version attribute checks first that the device has
it (`'memory' in device.capacity[...] && ...`): the driver leaves `memory` out when NVML does
not report it, and a missing key is a runtime error that aborts the whole allocation, where
a device that lacks the fact should simply not be picked.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from app.core.mapping import NodeLabels

PRODUCT = "nvidia.com/gpu.product"
FAMILY = "nvidia.com/gpu.family"
MEMORY = "nvidia.com/gpu.memory"
REPLICAS = "nvidia.com/gpu.replicas"
SHARING_STRATEGY = "nvidia.com/gpu.sharing-strategy"
# The GPU Operator's label of every node with an NVIDIA GPU (its NFD rule), DRA nodes too.
PRESENT = "nvidia.com/gpu.present"

_DOMAIN = "gpu.nvidia.com"
_ATTR = f"device.attributes['{_DOMAIN}']"
_CAPACITY = f"device.capacity['{_DOMAIN}']"
_MEMORY = f"{_CAPACITY}.memory"

# GFD version labels -> (the driver's version attribute, the part of it the label holds).
# GFD's cuda.driver-version is NVML's driver version (the driver's `driverVersion`); its
# cuda.runtime-version is NVML's CUDA driver version (the driver's `cudaDriverVersion`).
# The cuda.driver.* and cuda.runtime.* spellings are GFD's deprecated ones, still written.
_VERSIONS: dict[str, tuple[str, str]] = {
    "nvidia.com/gpu.compute.major": ("cudaComputeCapability", "major"),
    "nvidia.com/gpu.compute.minor": ("cudaComputeCapability", "minor"),
    "nvidia.com/cuda.driver-version.full": ("driverVersion", "full"),
    "nvidia.com/cuda.driver-version.major": ("driverVersion", "major"),
    "nvidia.com/cuda.driver-version.minor": ("driverVersion", "minor"),
    "nvidia.com/cuda.driver-version.revision": ("driverVersion", "patch"),
    "nvidia.com/cuda.driver.major": ("driverVersion", "major"),
    "nvidia.com/cuda.driver.minor": ("driverVersion", "minor"),
    "nvidia.com/cuda.driver.rev": ("driverVersion", "patch"),
    "nvidia.com/cuda.runtime-version.full": ("cudaDriverVersion", "full"),
    "nvidia.com/cuda.runtime-version.major": ("cudaDriverVersion", "major"),
    "nvidia.com/cuda.runtime-version.minor": ("cudaDriverVersion", "minor"),
    "nvidia.com/cuda.runtime.major": ("cudaDriverVersion", "major"),
    "nvidia.com/cuda.runtime.minor": ("cudaDriverVersion", "minor"),
}
# Labels every GPU node has, and every device of the driver answers: `Exists` asks nothing.
_ALWAYS = frozenset({PRODUCT, FAMILY, MEMORY, *_VERSIONS})

# GFD derives gpu.family from the compute capability; the DRA driver's `architecture` names the
# same generations, capitalised and with spaces ("Ada Lovelace" <-> "ada-lovelace").
_FAMILIES = frozenset(
    {
        "kepler",
        "maxwell",
        "pascal",
        "volta",
        "turing",
        "ampere",
        "ada-lovelace",
        "hopper",
        "blackwell",
        "rubin",
    }
)

# GFD sanitises the NVML name: it drops characters outside [A-Za-z0-9-_. ] and joins words
# with dashes; productName keeps the spaces. Replacing spaces maps every real NVIDIA name.
_PRODUCT_EXPR = f"{_ATTR}.productName.replace(' ', '-')"
_FAMILY_EXPR = f"{_ATTR}.architecture.lowerAscii().replace(' ', '-')"

MIG_INFIX = "-MIG-"
SHARED_SUFFIX = "-SHARED"


def quote_cel(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _one_of(expr: str, values: Sequence[str]) -> str:
    if len(values) == 1:
        return f"{expr} == {quote_cel(values[0])}"
    return f"{expr} in [{', '.join(quote_cel(v) for v in values)}]"


def model_of(value: str) -> str:
    """The GPU model a GFD product value names: without GFD's `-MIG-<profile>` (MIG single
    strategy) and `-SHARED` (sharing replicas), which the device's productName has neither."""
    return value.removesuffix(SHARED_SUFFIX).split(MIG_INFIX, 1)[0]


def _ints(values: Sequence[str]) -> list[int] | None:
    if values and all(v.isascii() and v.isdigit() and len(v) <= 12 for v in values):
        return [int(v) for v in values]
    return None


def _memory_range(mib: int) -> str:
    # GFD's gpu.memory is NVML's total in MiB rounded down, so N means N Mi <= memory < N+1 Mi.
    # On a MIG single-strategy node it is the MIG device's MemorySizeMB (k8s-device-plugin
    # internal/resource/nvml-mig-device.go), which the driver publishes as its MIG devices'
    # memory in Mi (dra-driver-nvidia-gpu cmd/gpu-kubelet-plugin/mig.go): the same range.
    return (
        f"({_MEMORY}.compareTo(quantity('{mib}Mi')) >= 0 && "
        f"{_MEMORY}.compareTo(quantity('{mib + 1}Mi')) < 0)"
    )


def _memory(op: str, mibs: list[int]) -> str:
    guard = f"'memory' in {_CAPACITY}"
    if op == "Gt":  # label > N: at least N+1 Mi
        return f"({guard} && {_MEMORY}.compareTo(quantity('{mibs[0] + 1}Mi')) >= 0)"
    if op == "Lt":  # label < N: less than N Mi
        return f"({guard} && {_MEMORY}.compareTo(quantity('{mibs[0]}Mi')) < 0)"
    ranges = " || ".join(_memory_range(m) for m in mibs)
    return f"({guard} && ({ranges}))" if len(mibs) > 1 else f"({guard} && {ranges})"


def semver_of(value: str) -> str | None:
    """A GFD version (`550.107.02`, `12.5`) as the driver publishes it: semver with leading
    zeros dropped and a missing patch as 0 (`550.107.2`, `12.5.0`); None if not a version."""
    parts = value.split(".")
    if not 2 <= len(parts) <= 3 or _ints(parts) is None:
        return None
    numbers = [int(p) for p in parts] + [0] * (3 - len(parts))
    return ".".join(map(str, numbers))


def _version(attribute: str, part: str, op: str, values: Sequence[str]) -> str | None:
    expr = f"{_ATTR}.{attribute}"
    guard = f"'{attribute}' in {_ATTR}"
    if part == "full":
        versions = [semver_of(v) for v in values]
        if op not in ("In", "NotIn") or None in versions:
            return None
        tests = [f"{expr}.compareTo(semver('{v}')) == 0" for v in dict.fromkeys(versions)]
        test = " || ".join(tests)
        return f"({guard} && ({test}))" if len(tests) > 1 else f"({guard} && {test})"
    numbers = _ints(values)
    if numbers is None:
        return None
    got = f"{expr}.{part}()"
    if op == "Gt":
        test = f"{got} > {numbers[0]}"
    elif op == "Lt":
        test = f"{got} < {numbers[0]}"
    elif len(numbers) == 1:
        test = f"{got} == {numbers[0]}"
    else:
        test = f"{got} in [{', '.join(map(str, dict.fromkeys(numbers)))}]"
    return f"({guard} && {test})"


# One CEL expression, "" when the requirement holds for every device, None when untranslatable.
Cel = str | None


def requirement_cel(
    key: str, op: str, values: Sequence[str], kind: NodeLabels, *, slice_memory: bool = False
) -> Cel:
    """The CEL selector that asks of a `kind` device what the requirement asks of its node.
    `slice_memory`: the pod selects MIG single-strategy nodes, whose gpu.memory is the MIG
    device's memory rather than the whole GPU's."""
    # Pods of one workload repeat the same few node terms: each is turned into CEL once
    # (long value lists are not kept, so the cache stays small).
    convert = _cached_cel if len(values) <= 16 else _cel
    return convert(key, op, tuple(values), kind, slice_memory=slice_memory)


def _cel(
    key: str, op: str, values: tuple[str, ...], kind: NodeLabels, *, slice_memory: bool
) -> Cel:
    if kind == "none":
        return None
    if key in (REPLICAS, SHARING_STRATEGY):
        # Whether the pod wanted shared GPUs was decided before: it is left as it is, or its
        # claims carry the driver's sharing config. A DRA device is no replica of anything.
        return ""
    if key == PRESENT and (op == "Exists" or (op == "In" and values == ("true",))):
        return ""  # a request for a GPU device implies a node that has one
    if op == "Exists" and key in _ALWAYS:
        return ""  # every GPU node has these labels; the device request already implies it
    if op in ("Gt", "Lt"):
        if len(values) != 1:
            return None
        if key == MEMORY and (kind == "gpu" or slice_memory) and (mibs := _ints(values)):
            return _memory(op, mibs)
        if key in _VERSIONS:
            return _version(*_VERSIONS[key], op, values)
        return None
    if op not in ("In", "NotIn") or not values:
        return None
    if key == PRODUCT:
        cel = _product_cel(op, values, kind)
        if cel is None or cel == "":
            return cel
    elif key == FAMILY and all(v in _FAMILIES for v in values):
        cel = _one_of(_FAMILY_EXPR, values)
    elif key == MEMORY and (kind == "gpu" or slice_memory) and (mibs := _ints(values)):
        cel = _memory(op, mibs)
    elif key in _VERSIONS and (found := _version(*_VERSIONS[key], op, values)) is not None:
        cel = found
    else:
        return None
    return f"!({cel})" if op == "NotIn" else cel


def _product_cel(op: str, values: tuple[str, ...], kind: NodeLabels) -> Cel:
    if op == "NotIn":
        # Avoiding shared GPUs asks nothing of a DRA device (none is a replica), nor does
        # avoiding MIG single-strategy nodes of a whole GPU; for a MIG device, avoiding one
        # model-and-profile would avoid it on mixed-strategy nodes too: not exact.
        kept = [v for v in values if not v.endswith(SHARED_SUFFIX)]
        if any(MIG_INFIX in v for v in kept):
            if kind != "gpu":
                return None
            kept = [v for v in kept if MIG_INFIX not in v]
        return _one_of(_PRODUCT_EXPR, sorted(set(kept))) if kept else ""
    if kind == "gpu" and any(MIG_INFIX in v for v in values):
        return None  # a MIG single-strategy node offers no whole GPU: the translator decides
    return _one_of(_PRODUCT_EXPR, sorted({model_of(v) for v in values}))


_cached_cel = lru_cache(maxsize=1024)(_cel)
