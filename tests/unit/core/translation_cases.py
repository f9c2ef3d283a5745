"""The translator's table: pod spec -> expected pod spec, templates, warnings, one Case a rule."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from app.core.outcomes import Code
from app.core.templates import sharing_config
from tests.support.pods import GPU, MIG, PRODUCT_A100, Obj, claimed, container, gpu, pod_claim, tpl

MEM = "device.capacity['gpu.nvidia.com'].memory"
HAS_MEM = "'memory' in device.capacity['gpu.nvidia.com']"
ATTR = "device.attributes['gpu.nvidia.com']"
PRODUCT = "nvidia.com/gpu.product"
TIME_SLICED = sharing_config(
    "GpuConfig",
    json.dumps({"strategy": "TimeSlicing", "timeSlicingConfig": {"interval": "Default"}}),
)


def mem_range(mib: int) -> str:
    low, high = f"quantity('{mib}Mi')", f"quantity('{mib + 1}Mi')"
    return f"({MEM}.compareTo({low}) >= 0 && {MEM}.compareTo({high}) < 0)"


def product(name: str) -> str:
    return f"{ATTR}.productName.replace(' ', '-') == '{name}'"


def required(*exprs: Obj) -> Obj:
    """A required node affinity of one term."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": list(exprs)}]
            }
        }
    }


def expr(key: str, op: str, *values: str) -> Obj:
    return {"key": key, "operator": op, **({"values": list(values)} if values else {})}


FAMILY = "device.attributes['gpu.nvidia.com'].architecture.lowerAscii().replace(' ', '-')"


def profile(p: str) -> str:
    return f"device.attributes['gpu.nvidia.com'].profile == '{p}'"


@dataclass
class Case:
    id: str
    spec: Obj
    expected: Obj | None  # None: the spec comes back unchanged (the very same object)
    templates: list[tuple[str, str, int, tuple[str, ...]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # substrings, one per warning, in order
    policy: Obj | None = None  # fields over the embedded default policy
    annotations: dict[str, str] | None = None  # the pod's
    codes: tuple[Code, ...] = ()  # the outcome codes of the warnings, each once, in order


A100_1G5 = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
MIG_1G5 = (profile("1g.5gb"), PRODUCT_A100)

MIG_SINGLE_CASES = [
    Case(
        "MIG single strategy: nvidia.com/gpu on a <model>-MIG-<profile> node is a MIG device",
        {"nodeSelector": {PRODUCT: A100_1G5}, "containers": [container("c", gpu(1))]},
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", MIG, 1, *MIG_1G5))],
        },
        [("gpu", MIG, 1, MIG_1G5)],
    ),
    Case(
        "MIG single strategy: GFD's `.me` is the driver's `+me`",
        {
            "nodeSelector": {PRODUCT: "NVIDIA-A100-SXM4-80GB-MIG-1g.10gb.me"},
            "containers": [container("c", gpu(2))],
        },
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [
                pod_claim(
                    "c-gpu",
                    tpl("gpu", MIG, 2, profile("1g.10gb+me"), product("NVIDIA-A100-SXM4-80GB")),
                )
            ],
        },
        [("gpu", MIG, 2, (profile("1g.10gb+me"), product("NVIDIA-A100-SXM4-80GB")))],
    ),
    Case(
        "MIG single strategy in an affinity: gpu.memory is the MIG device's memory there",
        {
            "affinity": required(
                expr(PRODUCT, "In", A100_1G5, "NVIDIA-A100-SXM4-80GB-MIG-1g.5gb"),
                expr("nvidia.com/gpu.memory", "In", "4864"),
            ),
            "containers": [container("c", gpu(1))],
        },
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [
                pod_claim(
                    "c-gpu",
                    tpl(
                        "gpu",
                        MIG,
                        1,
                        profile("1g.5gb"),
                        f"{ATTR}.productName.replace(' ', '-') in "
                        "['NVIDIA-A100-SXM4-40GB', 'NVIDIA-A100-SXM4-80GB']",
                        f"({HAS_MEM} && {mem_range(4864)})",
                    ),
                )
            ],
        },
        [
            (
                "gpu",
                MIG,
                1,
                (
                    profile("1g.5gb"),
                    f"{ATTR}.productName.replace(' ', '-') in "
                    "['NVIDIA-A100-SXM4-40GB', 'NVIDIA-A100-SXM4-80GB']",
                    f"({HAS_MEM} && {mem_range(4864)})",
                ),
            )
        ],
    ),
    Case(
        "MIG single strategy, -MIG-INVALID: left as is",
        {
            "nodeSelector": {PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-INVALID"},
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["-MIG-INVALID; pod left as is"],
        codes=(Code.MIG_SINGLE,),
    ),
    Case(
        "MIG single strategy, a profile the driver does not name: left as is",
        {
            "nodeSelector": {PRODUCT: "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb.xx"},
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["selects MIG profile 1g.5gb.xx, which the DRA driver does not name"],
        codes=(Code.MIG_SINGLE,),
    ),
    Case(
        "MIG single strategy and whole GPUs in one In list: left as is",
        {
            "affinity": required(expr(PRODUCT, "In", A100_1G5, "NVIDIA-A100-SXM4-40GB")),
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["selects whole GPUs and MIG single-strategy nodes at once"],
        codes=(Code.MIG_SINGLE,),
    ),
    Case(
        "MIG single strategy with migSingle: none: left as is",
        {"nodeSelector": {PRODUCT: A100_1G5}, "containers": [container("c", gpu(1))]},
        None,
        warnings=["has no migSingle mapping"],
        policy={"migSingle": "none"},
        codes=(Code.NO_MIG_SINGLE_MAPPING,),
    ),
    Case(
        "avoiding MIG single-strategy nodes asks nothing of a whole GPU",
        {
            "affinity": required(expr(PRODUCT, "NotIn", A100_1G5, "Tesla-T4")),
            "containers": [container("c", gpu(1))],
        },
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1, f"!({product('Tesla-T4')})"))],
        },
        [("gpu", GPU, 1, (f"!({product('Tesla-T4')})",))],
    ),
]

SHARED_NODE = {PRODUCT: "NVIDIA-A100-SXM4-40GB-SHARED", "nvidia.com/gpu.replicas": "4"}
SHARED_CASES = [
    Case(
        "a -SHARED product: shared replicas would become exclusive, left as is",
        {"nodeSelector": SHARED_NODE, "containers": [container("c", gpu(1))]},
        None,
        warnings=["picks shared GPUs (time-slicing or MPS replicas) for nvidia.com/gpu"],
        codes=(Code.SHARED_NODES,),
    ),
    Case(
        "a sharing strategy in an affinity: left as is",
        {
            "affinity": required(expr("nvidia.com/gpu.sharing-strategy", "In", "mps")),
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["it would become exclusive"],
        codes=(Code.SHARED_NODES,),
    ),
    Case(
        "any number of replicas: left as is",
        {
            "affinity": required(expr("nvidia.com/gpu.replicas", "Exists")),
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["nvidia.com/gpu.replicas (Exists)"],
        codes=(Code.SHARED_NODES,),
    ),
    Case(
        "sharing: TimeSlicing: the claim carries the driver's sharing config",
        {"nodeSelector": SHARED_NODE, "containers": [container("c", gpu(1))]},
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [
                pod_claim("c-gpu", tpl("gpu", GPU, 1, PRODUCT_A100, config=TIME_SLICED))
            ],
        },
        [("gpu", GPU, 1, (PRODUCT_A100,))],
        ["shared by TimeSlicing only among this pod's containers"],
        policy={"mappings": {"nvidia.com/gpu": {"deviceClassName": GPU, "sharing": "TimeSlicing"}}},
        codes=(Code.SHARING_NARROWED,),
    ),
    Case(
        "nvidia.com/gpu.shared mapped with sharing",
        {"containers": [container("c", {"nvidia.com/gpu.shared": 2})]},
        {
            "containers": [claimed("c", "c-gpu-shared")],
            "resourceClaims": [
                pod_claim("c-gpu-shared", tpl("gpu-shared", GPU, 2, config=TIME_SLICED))
            ],
        },
        [("gpu-shared", GPU, 2, ())],
        ["shared by TimeSlicing"],
        policy={
            "mappings": {
                "nvidia.com/gpu.shared": {"deviceClassName": GPU, "sharing": "TimeSlicing"}
            }
        },
        codes=(Code.SHARING_NARROWED,),
    ),
    Case(
        "not shared: sharing-strategy none and avoiding -SHARED ask nothing of a device",
        {
            "affinity": required(
                expr("nvidia.com/gpu.sharing-strategy", "In", "none"),
                expr(PRODUCT, "NotIn", "NVIDIA-A100-SXM4-40GB-SHARED"),
            ),
            "containers": [container("c", gpu(1))],
        },
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
    ),
]

LEFT = "pod left as is (a pod is translated whole or not at all)"

COMPANION_CASES = [
    Case(
        "HAMi fractions: gpumem and gpucores come with nvidia.com/gpu; left as is",
        {
            "containers": [
                container("c", {**gpu(1), "nvidia.com/gpumem": 3000, "nvidia.com/gpucores": 30})
            ]
        },
        None,
        warnings=[
            "container 'c' asks for nvidia.com/gpumem, nvidia.com/gpucores: no mapping covers "
            f"them (a GPU fraction, property or selection a DRA claim cannot give); {LEFT}"
        ],
        codes=(Code.VENDOR_RESOURCE,),
    ),
    Case(
        "a vendor resource in another container leaves the whole pod",
        {
            "containers": [
                container("a", gpu(1)),
                container("b", {"nvidia.com/gpumem-percentage": 50}),
            ]
        },
        None,
        warnings=["container 'b' asks for nvidia.com/gpumem-percentage: no mapping covers it"],
        codes=(Code.VENDOR_RESOURCE,),
    ),
    Case(
        "a vendor resource in an init container leaves the whole pod",
        {
            "initContainers": [container("prep", {"nvidia.com/gpucores": 30})],
            "containers": [container("a", gpu(1))],
        },
        None,
        warnings=["initContainer 'prep' asks for nvidia.com/gpucores"],
        codes=(Code.VENDOR_RESOURCE,),
    ),
    Case(
        "another vendor's resources are not nvidia.com's: the GPU moves",
        {"containers": [container("a", gpu(1)), container("b", {"example.com/fpga": 1})]},
        {
            "containers": [claimed("a", "a-gpu"), container("b", {"example.com/fpga": 1})],
            "resourceClaims": [pod_claim("a-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
    ),
]

# One container that cannot be translated leaves every other container of its pod as it is.
WHOLE_POD_CASES = [
    Case(
        f"one container left ({why}) leaves the pod whole",
        {"containers": [container("a", gpu(1)), bad]},
        None,
        warnings=[f"container {bad['name']!r}: {warning}"],
        codes=(code,),
    )
    for why, bad, code, warning in [
        (
            "request without limit",
            container("b", requests=gpu(1)),
            Code.NO_LIMIT,
            "nvidia.com/gpu is requested",
        ),
        (
            "request differs",
            container("b", gpu(2), gpu(1)),
            Code.REQUEST_NOT_LIMIT,
            "nvidia.com/gpu request 1 differs",
        ),
        (
            "33 devices",
            container("b", gpu(33)),
            Code.TOO_MANY_DEVICES,
            "nvidia.com/gpu: 33 devices exceed",
        ),
        (
            "not a count",
            container("b", gpu("x")),
            Code.NOT_A_COUNT,
            "nvidia.com/gpu count 'x' is not",
        ),
        (
            "not a MIG profile",
            container("b", {"nvidia.com/mig-large": 1}),
            Code.NOT_A_MIG_PROFILE,
            "nvidia.com/mig-large",
        ),
        (
            "shared replicas",
            container("b", {"nvidia.com/gpu.shared": 1}),
            Code.SHARED_REPLICAS,
            "nvidia.com/gpu.shared",
        ),
    ]
] + [
    Case(
        "an init container left leaves the app containers too",
        {
            "initContainers": [container("prep", gpu(40))],
            "containers": [container("a", gpu(1))],
        },
        None,
        warnings=["initContainer 'prep': nvidia.com/gpu: 40 devices exceed the 32"],
        codes=(Code.TOO_MANY_DEVICES,),
    ),
    Case(
        "a sidecar left leaves the app containers too",
        {
            "initContainers": [{**container("side", requests=gpu(1)), "restartPolicy": "Always"}],
            "containers": [container("a", gpu(1))],
        },
        None,
        warnings=["initContainer 'side': nvidia.com/gpu is requested without a limit"],
        codes=(Code.NO_LIMIT,),
    ),
]


GPU_PRESENT_CASES = [
    Case(
        f"the GPU Operator's nvidia.com/gpu.present ({how}) is implied by the claim",
        {**term, "containers": [container("c", gpu(1))]},
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
    )
    for how, term in [
        ("nodeSelector", {"nodeSelector": {"nvidia.com/gpu.present": "true"}}),
        ("Exists", {"affinity": required(expr("nvidia.com/gpu.present", "Exists"))}),
    ]
] + [
    Case(
        "nvidia.com/gpu.present false picks nodes without GPUs: the pod is left",
        {
            "nodeSelector": {"nvidia.com/gpu.present": "false"},
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["nvidia.com/gpu.present"],
        codes=(Code.NODE_LABEL,),
    ),
]

# Preemption (app/core/priority.py): the scheduler does not preempt for DRA claims.
PREEMPTION_CASES = [
    Case(
        "a priority class that can preempt keeps the pod on the device plugin",
        {"priorityClassName": "high", "containers": [container("c", gpu(1))]},
        None,
        warnings=["priorityClassName high can preempt, and the scheduler does not preempt"],
        codes=(Code.PREEMPTING,),
    ),
    Case(
        "as the Priority admission plugin resolves it: PreemptLowerPriority preempts",
        {
            "priorityClassName": "high",
            "priority": 1000,
            "preemptionPolicy": "PreemptLowerPriority",
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["pod left on the device plugin (policy preemptingPods: leave"],
        codes=(Code.PREEMPTING,),
    ),
    Case(
        "a class that never preempts loses nothing: translated",
        {
            "priorityClassName": "batch",
            "priority": 10,
            "preemptionPolicy": "Never",
            "containers": [container("c", gpu(1))],
        },
        {
            "priorityClassName": "batch",
            "priority": 10,
            "preemptionPolicy": "Never",
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
    ),
    Case(
        "preemptingPods: translate moves it, and says what it loses",
        {"priorityClassName": "high", "containers": [container("c", gpu(1))]},
        {
            "priorityClassName": "high",
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
        warnings=["can preempt, but the scheduler does not preempt for DRA claims"],
        policy={"preemptingPods": "translate"},
        codes=(Code.PREEMPTION_LOST,),
    ),
]


def version(attribute: str, test: str) -> str:
    return f"('{attribute}' in {ATTR} && {ATTR}.{attribute}{test})"


VERSION_CASES = [
    Case(
        "GFD compute capability and driver version become version selectors",
        {
            "nodeSelector": {
                "nvidia.com/gpu.compute.major": "8",
                "nvidia.com/cuda.driver-version.full": "550.107.02",
            },
            "affinity": required(
                expr("nvidia.com/gpu.compute.minor", "In", "0", "6"),
                expr("nvidia.com/cuda.runtime-version.major", "Gt", "11"),
                expr("nvidia.com/gpu.memory", "Lt", "81920"),
            ),
            "containers": [container("c", gpu(1))],
        },
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [
                pod_claim(
                    "c-gpu",
                    tpl(
                        "gpu",
                        GPU,
                        1,
                        version("cudaComputeCapability", ".major() == 8"),
                        version("driverVersion", ".compareTo(semver('550.107.2')) == 0"),
                        version("cudaComputeCapability", ".minor() in [0, 6]"),
                        version("cudaDriverVersion", ".major() > 11"),
                        f"({HAS_MEM} && {MEM}.compareTo(quantity('81920Mi')) < 0)",
                    ),
                )
            ],
        },
        [
            (
                "gpu",
                GPU,
                1,
                (
                    version("cudaComputeCapability", ".major() == 8"),
                    version("driverVersion", ".compareTo(semver('550.107.2')) == 0"),
                    version("cudaComputeCapability", ".minor() in [0, 6]"),
                    version("cudaDriverVersion", ".major() > 11"),
                    f"({HAS_MEM} && {MEM}.compareTo(quantity('81920Mi')) < 0)",
                ),
            )
        ],
    ),
    Case(
        "fail closed: a driver version GFD did not write as a version leaves the pod",
        {
            "nodeSelector": {"nvidia.com/cuda.driver-version.full": "550.x"},
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["node label nvidia.com/cuda.driver-version.full (In 550.x): a GPU vendor's"],
        codes=(Code.NODE_LABEL,),
    ),
]


# ---- fail closed: what can pick the pod's GPUs and is not translated leaves the pod --------

NAME = f"{ATTR}.productName"
CARD = f"({NAME}.startsWith('NVIDIA') ? {NAME} : 'NVIDIA-' + {NAME}).upperAscii()"
HAS_NAME = f"'productName' in {ATTR}"
HAS_UUID = f"'uuid' in {ATTR}"
UUID_A, UUID_B = "GPU-8f3c1f40-0000-4000-8000-00000000000a", "GPU-8f3c1f40-0000-4000-8000-0b"
ONE_GPU = {"containers": [container("c", gpu(1))]}


def hami(name: str, annotations: dict[str, str], *selectors: str) -> Case:
    """A pod whose HAMi device annotations become `selectors` on its one whole GPU."""
    return Case(
        name,
        ONE_GPU,
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1, *selectors))],
        },
        [("gpu", GPU, 1, selectors)],
        annotations=annotations,
    )


def left(name: str, spec: Obj, warning: str, **kwargs: Any) -> Case:
    return Case(name, spec, None, warnings=[warning], **kwargs)


FAIL_CLOSED_CASES = [
    hami(
        "HAMi use-gputype: a case-insensitive substring of HAMi's card type",
        {"nvidia.com/use-gputype": "a100"},
        f"({HAS_NAME} && {CARD}.contains('A100'))",
    ),
    hami(
        "HAMi use-gputype list: any entry, trimmed, empty entries dropped",
        {"nvidia.com/use-gputype": " A100 , ,h100,A100"},
        f"({HAS_NAME} && ({CARD}.contains('A100') || {CARD}.contains('H100')))",
    ),
    hami(
        "HAMi nouse-gputype: none of the entries",
        {"nvidia.com/nouse-gputype": "T4,V100"},
        f"({HAS_NAME} && !({CARD}.contains('T4') || {CARD}.contains('V100')))",
    ),
    hami(
        "HAMi use-gpuuuid and nouse-gpuuuid: exact UUIDs, both apply",
        {"nvidia.com/use-gpuuuid": f"{UUID_A}, {UUID_B}", "nvidia.com/nouse-gpuuuid": UUID_B},
        f"({HAS_UUID} && !({ATTR}.uuid in ['{UUID_B}']))",  # annotations by key
        f"({HAS_UUID} && {ATTR}.uuid in ['{UUID_A}', '{UUID_B}'])",
    ),
    hami(
        "HAMi: an empty value is no constraint",
        {"nvidia.com/use-gputype": " ", "nvidia.com/nouse-gpuuuid": ""},
    ),
    hami(
        "HAMi: unrelated annotations are not read",
        {"example.com/team": "ml", "kubectl.kubernetes.io/last-applied-configuration": "{}"},
    ),
    Case(
        "HAMi use-gputype ignored by the policy: translated without it",
        ONE_GPU,
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
        policy={"ignoreKeys": ["nvidia.com/use-gputype"]},
        annotations={"nvidia.com/use-gputype": "A100"},
    ),
    left(
        "fail closed: HAMi use-gputype that names no type (HAMi picks no GPU)",
        ONE_GPU,
        "annotation nvidia.com/use-gputype ',' names no GPU: HAMi picks none; pod left as is",
        annotations={"nvidia.com/use-gputype": ","},
        codes=(Code.ANNOTATION_VALUE,),
    ),
    left(
        "fail closed: HAMi use-gputype beyond ASCII (Go's ToUpper is not upperAscii)",
        ONE_GPU,
        "annotation nvidia.com/use-gputype holds characters outside printable ASCII",
        annotations={"nvidia.com/use-gputype": "\u017fxm"},
        codes=(Code.ANNOTATION_VALUE,),
    ),
    left(
        "fail closed: HAMi use-gputype on a MIG request",
        {"containers": [container("c", {"nvidia.com/mig-1g.5gb": 1})]},
        "asks for MIG devices or devices of another kind; pod left as is",
        annotations={"nvidia.com/use-gputype": "A100"},
        codes=(Code.HAMI_NOT_WHOLE,),
    ),
    left(
        "fail closed: HAMi use-gpuuuid on a MIG single-strategy node",
        {"nodeSelector": {PRODUCT: A100_1G5}, "containers": [container("c", gpu(1))]},
        "nvidia.com/gpu asks for MIG devices",
        annotations={"nvidia.com/use-gpuuuid": UUID_A},
        codes=(Code.HAMI_NOT_WHOLE,),
    ),
    left(
        "fail closed: another nvidia.com annotation (HAMi's vgpu-mode)",
        ONE_GPU,
        "annotation nvidia.com/vgpu-mode is read by a GPU scheduler or device plugin",
        annotations={"nvidia.com/vgpu-mode": "mig"},
        codes=(Code.ANNOTATION,),
    ),
    left(
        "fail closed: HAMi's numa-bind",
        ONE_GPU,
        "annotation nvidia.com/numa-bind is read by a GPU scheduler",
        annotations={"nvidia.com/numa-bind": "true"},
        codes=(Code.ANNOTATION,),
    ),
    left(
        "fail closed: a hami.io annotation",
        ONE_GPU,
        "annotation hami.io/gpu-scheduler-policy is read by a GPU scheduler",
        annotations={"hami.io/gpu-scheduler-policy": "binpack"},
        codes=(Code.ANNOTATION,),
    ),
    left(
        "fail closed: an annotation in a subdomain of nvidia.com",
        ONE_GPU,
        "annotation gpu.nvidia.com/x is read by a GPU scheduler",
        annotations={"gpu.nvidia.com/x": "y"},
        codes=(Code.ANNOTATION,),
    ),
    Case(
        "an ignored hami.io annotation leaves no pod (ignoreKeys prefix)",
        ONE_GPU,
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
        policy={"ignoreKeys": ["hami.io/*"]},
        annotations={"hami.io/gpu-scheduler-policy": "binpack"},
    ),
    left(
        "fail closed: a nvidia.com node label that is not GFD's",
        {"nodeSelector": {"nvidia.com/gpu-type": "a100"}, "containers": [container("c", gpu(1))]},
        "node label nvidia.com/gpu-type (In a100): a GPU vendor's label that gpu2dra cannot",
        codes=(Code.NODE_LABEL,),
    ),
    left(
        "fail closed: a GFD label with no device attribute (gpu.count) in an affinity",
        {
            "affinity": required(
                expr(PRODUCT, "In", "NVIDIA-A100-SXM4-40GB"),
                expr("nvidia.com/gpu.count", "Gt", "3"),
            ),
            "containers": [container("c", gpu(1))],
        },
        "node label nvidia.com/gpu.count (Gt 3): a GPU vendor's label",
        codes=(Code.NODE_LABEL,),
    ),
    Case(
        "an ignored node label stays a node term; the GFD ones are translated",
        {
            "nodeSelector": {
                "nvidia.com/gpu.deploy.dcgm": "true",
                PRODUCT: "NVIDIA-A100-SXM4-40GB",
            },
            "containers": [container("c", gpu(1))],
        },
        {
            "nodeSelector": {"nvidia.com/gpu.deploy.dcgm": "true"},
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1, PRODUCT_A100))],
        },
        [("gpu", GPU, 1, (PRODUCT_A100,))],
        policy={"ignoreKeys": ["nvidia.com/gpu.deploy.dcgm"]},
    ),
    Case(
        "node labels outside the watched domains stay node terms",
        {"nodeSelector": {"pool": "gpu", "example.com/rack": "r1"}, **ONE_GPU},
        {
            "nodeSelector": {"pool": "gpu", "example.com/rack": "r1"},
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
    ),
    left(
        "fail closed: a scheduler that is not known to allocate DRA claims (HAMi's)",
        {"schedulerName": "hami-scheduler", **ONE_GPU},
        "spec.schedulerName 'hami-scheduler' is not a scheduler known to allocate DRA claims "
        "(the policy's draSchedulers: default-scheduler); pod left as is",
        codes=(Code.SCHEDULER,),
    ),
    Case(
        "a scheduler the policy names in draSchedulers",
        {"schedulerName": "volcano", **ONE_GPU},
        {
            "schedulerName": "volcano",
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
        policy={"draSchedulers": ["default-scheduler", "volcano"]},
    ),
    Case(
        "schedulerName default-scheduler, written out",
        {"schedulerName": "default-scheduler", **ONE_GPU},
        {
            "schedulerName": "default-scheduler",
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
    ),
    left(
        "fail closed: default-scheduler not in draSchedulers",
        ONE_GPU,
        "spec.schedulerName 'default-scheduler' is not a scheduler known",
        policy={"draSchedulers": ["kai-scheduler"]},
        codes=(Code.SCHEDULER,),
    ),
    Case(
        "an ignored vendor resource beside a GPU is no companion",
        {"containers": [container("c", {**gpu(1), "nvidia.com/gpucores": 50})]},
        {
            "containers": [claimed("c", "c-gpu", limits={"nvidia.com/gpucores": 50})],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
        policy={"ignoreKeys": ["nvidia.com/gpucores"]},
    ),
    Case(
        "fail closed: every reason is named",
        {"schedulerName": "hami-scheduler", **ONE_GPU},
        None,
        warnings=["spec.schedulerName 'hami-scheduler'", "annotation hami.io/x is read"],
        annotations={"hami.io/x": "1"},
        codes=(Code.SCHEDULER, Code.ANNOTATION),
    ),
]


CASES = [
    Case(
        "one container, two GPUs",
        {"containers": [container("train", gpu(2))]},
        {
            "containers": [claimed("train", "train-gpu")],
            "resourceClaims": [pod_claim("train-gpu", tpl("gpu", GPU, 2))],
        },
        [("gpu", GPU, 2, ())],
    ),
    Case(
        "quoted count, equal request; other resources stay",
        {"containers": [container("c", {**gpu("2"), "cpu": "1"}, {**gpu("2"), "memory": "1Gi"})]},
        {
            "containers": [
                {
                    "name": "c",
                    "image": "cuda:12",
                    "resources": {
                        "limits": {"cpu": "1"},
                        "requests": {"memory": "1Gi"},
                        "claims": [{"name": "c-gpu"}],
                    },
                }
            ],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 2))],
        },
        [("gpu", GPU, 2, ())],
    ),
    Case(
        "zero GPUs: key removed, no claim",
        {"containers": [container("c", {**gpu(0), "cpu": "1"})]},
        {"containers": [container("c", {"cpu": "1"})]},
    ),
    Case(
        "more than 32 devices: left as is",
        {"containers": [container("c", gpu(33))]},
        None,
        warnings=["33 devices exceed the 32"],
        codes=(Code.TOO_MANY_DEVICES,),
    ),
    *(
        Case(
            f"count {bad!r} is not a non-negative integer",
            {"containers": [container("c", gpu(bad))]},
            None,
            warnings=["not a non-negative integer"],
            codes=(Code.NOT_A_COUNT,),
        )
        for bad in ("abc", -1, 1.5, True, "1e-3", "2.5", "")
    ),
    Case(
        "request without limit: left as is",
        {"containers": [container("c", requests=gpu(1))]},
        None,
        warnings=["without a limit"],
        codes=(Code.NO_LIMIT,),
    ),
    Case(
        "request differs from limit: left as is",
        {"containers": [container("c", gpu(2), gpu(1))]},
        None,
        warnings=["differs from its limit"],
        codes=(Code.REQUEST_NOT_LIMIT,),
    ),
    Case(
        "mixed-strategy MIG",
        {"containers": [container("c", {"nvidia.com/mig-1g.10gb": 1})]},
        {
            "containers": [claimed("c", "c-mig-1g-10gb")],
            "resourceClaims": [
                pod_claim("c-mig-1g-10gb", tpl("mig-1g-10gb", MIG, 1, profile("1g.10gb")))
            ],
        },
        [("mig-1g-10gb", MIG, 1, (profile("1g.10gb"),))],
    ),
    Case(
        "MIG with media extensions: the plugin's `.me` is the driver's `+me`",
        {"containers": [container("c", {"nvidia.com/mig-1g.10gb.me": "2"})]},
        {
            "containers": [claimed("c", "c-mig-1g-10gb-me")],
            "resourceClaims": [
                pod_claim("c-mig-1g-10gb-me", tpl("mig-1g-10gb-me", MIG, 2, profile("1g.10gb+me")))
            ],
        },
        [("mig-1g-10gb-me", MIG, 2, (profile("1g.10gb+me"),))],
    ),
    Case(
        "not a MIG profile: left as is",
        {"containers": [container("c", {"nvidia.com/mig-large": 1})]},
        None,
        warnings=["does not name a MIG profile"],
        codes=(Code.NOT_A_MIG_PROFILE,),
    ),
    Case(
        "shared GPU replicas would become exclusive: left as is",
        {"containers": [container("c", {"nvidia.com/gpu.shared": 1})]},
        None,
        warnings=["it would become exclusive"],
        codes=(Code.SHARED_REPLICAS,),
    ),
    Case(
        "regular init container reuses the app container's claim",
        {
            "initContainers": [container("prep", gpu(1))],
            "containers": [container("main", gpu(2))],
        },
        {
            "initContainers": [claimed("prep", "main-gpu")],
            "containers": [claimed("main", "main-gpu")],
            "resourceClaims": [pod_claim("main-gpu", tpl("gpu", GPU, 2))],
        },
        [("gpu", GPU, 2, ())],
    ),
    Case(
        "init container needing more than any one app claim reuses several",
        {
            "initContainers": [container("prep", gpu(3))],
            "containers": [container("a", gpu(2)), container("b", gpu(2))],
        },
        {
            "initContainers": [claimed("prep", "a-gpu", "b-gpu")],
            "containers": [claimed("a", "a-gpu"), claimed("b", "b-gpu")],
            "resourceClaims": [
                pod_claim("a-gpu", tpl("gpu", GPU, 2)),
                pod_claim("b-gpu", tpl("gpu", GPU, 2)),
            ],
        },
        [("gpu", GPU, 2, ())],
    ),
    Case(
        "init container needing more than all app claims gets its own, with a warning",
        {
            "initContainers": [container("prep", gpu(4))],
            "containers": [container("main", gpu(1))],
        },
        {
            "initContainers": [claimed("prep", "prep-gpu")],
            "containers": [claimed("main", "main-gpu")],
            "resourceClaims": [
                pod_claim("main-gpu", tpl("gpu", GPU, 1)),
                pod_claim("prep-gpu", tpl("gpu", GPU, 4)),
            ],
        },
        [("gpu", GPU, 1, ()), ("gpu", GPU, 4, ())],
        ["holds 5 devices where the device plugin gave it 4"],
        codes=(Code.MORE_DEVICES,),
    ),
    Case(
        "an init container alone in asking gets its own claim: no more devices, no warning",
        {
            "initContainers": [container("fetch", gpu(2))],
            "containers": [container("main")],
        },
        {
            "initContainers": [claimed("fetch", "fetch-gpu")],
            "containers": [container("main")],
            "resourceClaims": [pod_claim("fetch-gpu", tpl("gpu", GPU, 2))],
        },
        [("gpu", GPU, 2, ())],
        [],
    ),
    Case(
        "sidecar gets a claim of its own",
        {
            "initContainers": [container("side", gpu(1), restartPolicy="Always")],
            "containers": [container("main", gpu(1))],
        },
        {
            "initContainers": [claimed("side", "side-gpu", restartPolicy="Always")],
            "containers": [claimed("main", "main-gpu")],
            "resourceClaims": [
                pod_claim("main-gpu", tpl("gpu", GPU, 1)),
                pod_claim("side-gpu", tpl("gpu", GPU, 1)),
            ],
        },
        [("gpu", GPU, 1, ())],
    ),
    Case(
        "existing claims kept, ours appended under a name that does not collide",
        {
            "resourceClaims": [{"name": "c-gpu", "resourceClaimName": "shared"}],
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"limits": gpu(1), "claims": [{"name": "c-gpu"}]},
                }
            ],
        },
        {
            "resourceClaims": [
                {"name": "c-gpu", "resourceClaimName": "shared"},
                pod_claim("c-gpu-73eec9", tpl("gpu", GPU, 1)),
            ],
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"claims": [{"name": "c-gpu"}, {"name": "c-gpu-73eec9"}]},
                }
            ],
        },
        [("gpu", GPU, 1, ())],
    ),
    Case(
        "two containers of one shape share one template",
        {"containers": [container("a", gpu(1)), container("b", gpu(1)), container("log")]},
        {
            "containers": [claimed("a", "a-gpu"), claimed("b", "b-gpu"), container("log")],
            "resourceClaims": [
                pod_claim("a-gpu", tpl("gpu", GPU, 1)),
                pod_claim("b-gpu", tpl("gpu", GPU, 1)),
            ],
        },
        [("gpu", GPU, 1, ())],
    ),
    Case(
        "GFD product nodeSelector becomes a CEL selector; other node labels stay",
        {
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB", "zone": "a"},
            "containers": [container("c", gpu(1))],
        },
        {
            "nodeSelector": {"zone": "a"},
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1, PRODUCT_A100))],
        },
        [("gpu", GPU, 1, (PRODUCT_A100,))],
    ),
    *MIG_SINGLE_CASES,
    *SHARED_CASES,
    *COMPANION_CASES,
    *WHOLE_POD_CASES,
    *PREEMPTION_CASES,
    *GPU_PRESENT_CASES,
    *VERSION_CASES,
    *FAIL_CLOSED_CASES,
    Case(
        "GFD memory and family in required node affinity; the term keeps the rest",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.memory",
                                        "operator": "In",
                                        "values": ["40960"],
                                    },
                                    {
                                        "key": "nvidia.com/gpu.family",
                                        "operator": "In",
                                        "values": ["ampere", "hopper"],
                                    },
                                    {"key": "zone", "operator": "In", "values": ["a"]},
                                ]
                            }
                        ]
                    }
                },
                "podAntiAffinity": {"x": 1},
            },
            "containers": [container("c", gpu(1))],
        },
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            }
                        ]
                    }
                },
                "podAntiAffinity": {"x": 1},
            },
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [
                pod_claim(
                    "c-gpu",
                    tpl(
                        "gpu",
                        GPU,
                        1,
                        f"({HAS_MEM} && {mem_range(40960)})",
                        f"{FAMILY} in ['ampere', 'hopper']",
                    ),
                )
            ],
        },
        [
            (
                "gpu",
                GPU,
                1,
                (
                    f"({HAS_MEM} && {mem_range(40960)})",
                    f"{FAMILY} in ['ampere', 'hopper']",
                ),
            )
        ],
    ),
    Case(
        "an affinity of only GFD terms disappears",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.product",
                                        "operator": "NotIn",
                                        "values": ["Tesla-T4"],
                                    },
                                ]
                            }
                        ]
                    }
                }
            },
            "containers": [container("c", gpu(1))],
        },
        {
            "containers": [claimed("c", "c-gpu")],
            "resourceClaims": [
                pod_claim(
                    "c-gpu",
                    tpl(
                        "gpu",
                        GPU,
                        1,
                        "!(device.attributes['gpu.nvidia.com'].productName"
                        ".replace(' ', '-') == 'Tesla-T4')",
                    ),
                )
            ],
        },
        [
            (
                "gpu",
                GPU,
                1,
                (
                    "!(device.attributes['gpu.nvidia.com'].productName"
                    ".replace(' ', '-') == 'Tesla-T4')",
                ),
            )
        ],
    ),
    Case(
        "fail closed: several affinity terms on GFD labels leave the pod",
        {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {
                                        "key": "nvidia.com/gpu.product",
                                        "operator": "In",
                                        "values": ["A"],
                                    }
                                ]
                            },
                            {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["b"]}
                                ]
                            },
                        ]
                    }
                }
            },
            "containers": [container("c", gpu(1))],
        },
        None,
        warnings=["nvidia.com/gpu.product (In A) in one of 2 ORed node affinity terms"],
        codes=(Code.NODE_LABEL,),
    ),
    Case(
        "fail closed: whole-GPU memory cannot select a MIG device, so the pod is left",
        {
            "nodeSelector": {"nvidia.com/gpu.memory": "40960"},
            "containers": [container("c", {"nvidia.com/mig-1g.5gb": 1})],
        },
        None,
        warnings=["node label nvidia.com/gpu.memory (In 40960): a GPU vendor's label"],
        codes=(Code.NODE_LABEL,),
    ),
    Case(
        "NVIDIA_VISIBLE_DEVICES read by the app",
        {"containers": [container("c", gpu(1), args=["echo $NVIDIA_VISIBLE_DEVICES"])]},
        {
            "containers": [claimed("c", "c-gpu", args=["echo $NVIDIA_VISIBLE_DEVICES"])],
            "resourceClaims": [pod_claim("c-gpu", tpl("gpu", GPU, 1))],
        },
        [("gpu", GPU, 1, ())],
        ["NVIDIA_VISIBLE_DEVICES"],
        codes=(Code.VISIBLE_DEVICES,),
    ),
    Case("no GPUs: nothing to do", {"containers": [container("c", {"cpu": "1"})]}, None),
]
