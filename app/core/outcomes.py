"""Every reason gpu2dra leaves a pod, changes it, or has something to say about it: a code and
its one message, here and nowhere else.

A `Finding` is the message's text and carries its code, so it goes wherever a warning's text
goes (admission warnings, `translate` output, `explain`) while `report`, the metrics and the
tests read the code, never the words. docs/reference/outcomes.md lists them all.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Literal

Kind = Literal["left", "translated", "note"]

# A pod is translated whole or not at all: one container left on the device plugin would
# leave its pod asking for device-plugin GPUs and DRA claims, from separate node pools.
POD_LEFT = "pod left as is (a pod is translated whole or not at all)"
NO_PREEMPTION = (
    "the scheduler does not preempt for DRA claims on Kubernetes 1.34-1.37 (KEP-5690), so "
    "it could no longer preempt lower-priority pods for GPUs"
)

# How a pod Kueue would not count ends, by the policy's kueuePods.
KUEUE_THEN = {
    "leave": "pod left on the device plugin, where the queue counts it (policy kueuePods: "
    "leave; set translate to move such pods)",
    "translate": "translated as the policy's kueuePods: translate says",
}


class Code(StrEnum):
    """What happened to a pod, and why. `kind` says whether the pod is left as it is (on the
    device plugin), translated with something its owner should know, or only noted."""

    kind: Kind
    message: str

    def __new__(cls, value: str, kind: Kind, message: str) -> Code:
        member = str.__new__(cls, value)
        member._value_ = value
        member.kind = kind
        member.message = message
        return member

    # ---- a container's requests: the whole pod is left ----
    SHARED_REPLICAS = (
        "shared-replicas",
        "left",
        "{who}: {resource} (shared GPU replicas): under DRA each pod's claim gets devices of "
        "its own, so it would become exclusive (give its mapping `consumable` in the policy "
        "to keep it shared with other pods, or `sharing: TimeSlicing` or `MPS`); " + POD_LEFT,
    )
    SHARED_COUNT = (
        "shared-count",
        "left",
        "{resource}: {count} time-sliced replicas: the device plugin gave them on one GPU or "
        "on several, as it found them free, while a DRA request takes {count} distinct "
        "devices or {count} shares of one, which is not what the pod had (ask for 1, or for "
        "whole GPUs); pod left as is",
    )
    MEMORY_AMOUNT = (
        "memory-amount",
        "left",
        "{who}: {resource} {amount!r} is not a whole number of MiB above 0 (or its request "
        "differs from its limit); " + POD_LEFT,
    )
    NOT_A_MIG_PROFILE = (
        "not-a-mig-profile",
        "left",
        "{who}: {resource} does not name a MIG profile; " + POD_LEFT,
    )
    NO_LIMIT = (
        "no-limit",
        "left",
        "{who}: {resource} is requested without a limit (extended resources need both, "
        "equal); " + POD_LEFT,
    )
    NOT_A_COUNT = (
        "not-a-count",
        "left",
        "{who}: {resource} count {count!r} is not a non-negative integer; " + POD_LEFT,
    )
    REQUEST_NOT_LIMIT = (
        "request-not-limit",
        "left",
        "{who}: {resource} request {request!r} differs from its limit {limit!r}; " + POD_LEFT,
    )
    TOO_MANY_DEVICES = (
        "too-many-devices",
        "left",
        "{who}: {resource}: {count} devices exceed the {most} a DRA claim can be allocated; "
        + POD_LEFT,
    )
    CLAIMS_NOT_A_LIST = (
        "claims-not-a-list",
        "left",
        "{who}: resources.claims is not a list; " + POD_LEFT,
    )
    VENDOR_RESOURCE = (
        "vendor-resource",
        "left",
        "{named}: no mapping covers {them} (a GPU fraction, property or selection a DRA "
        "claim cannot give); " + POD_LEFT,
    )
    # ---- the pod: fail closed on what can pick its GPUs ----
    SCHEDULER = (
        "scheduler",
        "left",
        "spec.schedulerName {name!r} is not a scheduler known to allocate DRA claims (the "
        "policy's draSchedulers: {known}); pod left as is",
    )
    YUNIKORN_POD = (
        "yunikorn-pod",
        "left",
        "{how} marks the pod for YuniKorn, whose admission controller sets its schedulerName "
        "to yunikorn after gpu2dra's webhook, and yunikorn is not a scheduler known to "
        "allocate DRA claims (the policy's draSchedulers: {known}); pod left as is",
    )
    ANNOTATION = (
        "annotation",
        "left",
        "annotation {key} is read by a GPU scheduler or device plugin (HAMi's, NVIDIA's) and "
        "gpu2dra does not translate it; pod left as is",
    )
    ANNOTATION_VALUE = (
        "annotation-value",
        "left",
        "annotation {key} {why}; pod left as is",
    )
    NODE_LABEL = (
        "node-label",
        "left",
        "node label {terms}: a GPU vendor's label that gpu2dra cannot turn into a device "
        "selector for every request of the pod, and {they} can pick its GPUs; pod left as is "
        "(name the label in the policy's ignoreKeys if it picks no GPU)",
    )
    INVALID_NODE_TERM = (
        "invalid-node-term",
        "left",
        "{problem} (the apiserver rejects it); pod left as is",
    )
    PREEMPTING = (
        "preempting",
        "left",
        "priorityClassName {name} can preempt, and " + NO_PREEMPTION + "; pod left on the "
        "device plugin (policy preemptingPods: leave; set translate to move such pods)",
    )
    PREEMPTING_IN_TREE = (
        "preempting-in-tree",
        "left",
        "priorityClassName {name} can preempt, and " + NO_PREEMPTION + "; pod left as is "
        "(policy preemptingPods: leave), but DeviceClass {classes} serves {resources} in-tree, "
        "through DRA claims too: it preempts only for nodes whose device plugin offers "
        "{resources}",
    )
    NO_DRA_DEVICES = (
        "no-dra-devices",
        "left",
        "no ResourceSlice publishes a device of DeviceClass {classes} ({drivers}), and no node "
        "autoscaler can add one: {autoscaling}; translated, the pod would stay Pending; pod "
        "left on the device plugin (policy noDraCapacity: leave; run the DRA driver on GPU "
        "nodes, or set translate to move such pods)",
    )
    CLOUD_POOL = (
        "cloud-pool",
        "left",
        "node label {terms} pins the pod to a cloud node pool or instance type, most often a "
        "device-plugin pool sized from nvidia.com/gpu requests, and nothing says {it} "
        "publishes DRA devices; translated, the pod could stay Pending; pod left on the device "
        "plugin (policy cloudPools: leave; set translate once the pool runs the DRA driver)",
    )
    POD_CLAIMS_NOT_A_LIST = (
        "pod-claims-not-a-list",
        "left",
        "spec.resourceClaims is not a list; pod left as is",
    )
    MIG_SINGLE = ("mig-single", "left", "the pod {problem}; pod left as is")
    NO_MIG_SINGLE_MAPPING = (
        "no-mig-single-mapping",
        "left",
        "the pod selects MIG single-strategy nodes (nvidia.com/gpu is a MIG device there) and "
        "the policy has no migSingle mapping; pod left as is",
    )
    HAMI_NOT_WHOLE = (
        "hami-not-whole",
        "left",
        "the pod's HAMi device annotations (nvidia.com/use-gputype, ...) select whole GPUs, "
        "and {resources} asks for MIG devices or devices of another kind; pod left as is",
    )
    SHARED_NODES = (
        "shared-nodes",
        "left",
        "node label {labels} picks shared GPUs (time-slicing or MPS replicas) for {resources}: "
        "under DRA each pod's claim gets devices of its own, so it would become exclusive; "
        "pod left as is (give the mapping `consumable` in the policy to keep it shared with "
        "other pods, or `sharing: TimeSlicing` or `MPS`)",
    )
    NOT_SHARING = (
        "not-sharing",
        "left",
        "no ResourceSlice of driver {driver} publishes devices with allowMultipleAllocations "
        "and a consumable capacity `{capacity}` for {resources}, so its claims would take "
        "whole GPUs; pod left on the device plugin (to share: run the NVIDIA DRA driver with "
        "--consumable-shares={flag} and its ConsumableShares feature gate; on Kubernetes 1.34 "
        "and 1.35 also turn on the DRAConsumableCapacity feature gate)",
    )
    NO_DEVICE_CLASS = (
        "no-device-class",
        "left",
        "DeviceClass {classes} does not exist; pod left as is so that it can still schedule "
        "through the device plugin",
    )
    # ---- admission: what only the live cluster tells ----
    QUOTA = (
        "quota",
        "left",
        "gpu2dra left the pod on the device plugin, under its quota: {found}, so its DRA "
        "claims would escape the quota; to translate such pods, limit the DRA side too: {fix}",
    )
    NOT_JSON = (
        "not-json",
        "left",
        "the pod spec holds a value JSON cannot carry; pod left as is",
    )
    NOT_SYNCED = ("not-synced", "left", "gpu2dra has not synced its caches yet")
    LATE = ("late", "left", "gpu2dra did not answer within {seconds:g}s")
    TEMPLATE_NOT_OURS = ("template-not-ours", "left", "gpu2dra will not translate the pod: {why}")
    TEMPLATE_ERROR = (
        "template-error",
        "left",
        "gpu2dra could not create ResourceClaimTemplates: {why}",
    )
    TEMPLATE_LIMIT = (
        "template-limit",
        "left",
        "namespace {namespace} holds {count} ResourceClaimTemplates of gpu2dra's, as many as "
        "the policy's templatesPerNamespace ({limit}) allows: none is made for this pod's "
        "shape; pod left on the device plugin (gpu2dra prune-templates deletes unused ones)",
    )
    NAMESPACE_UNSEEN = (
        "namespace-unseen",
        "left",
        "gpu2dra serves offline and reads no namespace's labels, so namespace {namespace} has "
        "the policy's defaultMode, disabled: pod admitted unchanged (serve it a policy with "
        "defaultMode: enabled or audit; POST /translate translates as enabled unless given "
        "?mode=)",
    )
    # ---- Kueue: a queued pod its ClusterQueue would not count (policy kueuePods) ----
    KUEUE_NO_DRA = (
        "kueue-no-dra",
        "left",
        "queued by {kueue} through its pod integration, which counts no DRA claim (before "
        "v0.14, or its version cannot be read from its Deployment's image): translated, the "
        "pod would escape its ClusterQueue's GPU quota; {then}",
    )
    KUEUE_GATE_OFF = (
        "kueue-gate-off",
        "left",
        "queued by {kueue} with its DRA gate {gate} off: it ignores DRA claims, so translated "
        "the pod would escape its ClusterQueue's GPU quota (start Kueue with "
        "--feature-gates={gate}=true and map the DeviceClasses in "
        "resources.deviceClassMappings); {then}",
    )
    KUEUE_UNMAPPED = (
        "kueue-unmapped",
        "left",
        "queued by {kueue}, whose resources.deviceClassMappings names no {classes}: translated, "
        "the pod would be inadmissible for good (map the class and restart Kueue); {then}",
    )
    KUEUE_SELECTORS = (
        "kueue-selectors",
        "left",
        "queued by {kueue}, which refuses DRA claims with CEL selectors (MIG profiles, GFD or "
        "HAMi selectors): translated, the pod would be held for good; {then}",
    )
    KUEUE_TRANSLATED = ("kueue-translated", "translated", "{why}")
    # ---- translated, with something its owner relied on changed ----
    PREEMPTION_LOST = (
        "preemption-lost",
        "translated",
        "priorityClassName {name} can preempt, but " + NO_PREEMPTION + "; translated as the "
        "policy's preemptingPods: translate says",
    )
    NO_DRA_DEVICES_TRANSLATED = (
        "no-dra-devices-translated",
        "translated",
        "no ResourceSlice publishes a device of DeviceClass {classes} ({drivers}), and no node "
        "autoscaler can add one: {autoscaling}; the pod stays Pending until a node publishes "
        "one; translated as the policy's noDraCapacity: translate says",
    )
    CLOUD_POOL_TRANSLATED = (
        "cloud-pool-translated",
        "translated",
        "node label {terms} pins the pod to a cloud node pool or instance type, most often a "
        "device-plugin pool sized from nvidia.com/gpu requests: the pod runs only if {it} "
        "publishes DRA devices (the DRA driver on its nodes)",
    )
    SHARING_NARROWED = (
        "sharing-narrowed",
        "translated",
        "shared GPUs become claims of their own, shared by {strategies} only among this pod's "
        "containers: pods no longer share a GPU with other pods (the driver needs its alpha "
        "feature gate {gates})",
    )
    CONSUMABLE = (
        "consumable",
        "translated",
        "{taken}: its claims take part of a GPU other pods share (DRA consumable capacity, "
        "KEP-5075) where the driver publishes it; pods of the same GPU see the same device",
    )
    VISIBLE_DEVICES = (
        "visible-devices",
        "translated",
        "{who} sets or reads NVIDIA_VISIBLE_DEVICES; under DRA it is `void` and devices come "
        "through CDI",
    )
    HOST_GPU_DEVICES = (
        "host-gpu-devices",
        "translated",
        "volume {volume!r} mounts {path} from the host: the claim's GPUs reach the container "
        "through CDI, which adds their device nodes and allows them in its device cgroup; the "
        "mounted nodes give no other GPU to an unprivileged container, and every GPU of the "
        "node to a privileged one, as before (drop the mount)",
    )
    NUMA_ALIGNMENT = (
        "numa-alignment",
        "translated",
        "{who} also asks for {resources} from a device plugin: the Topology Manager aligned "
        "them on one NUMA node with the GPUs, but it gets no hints for devices of DRA claims, "
        "so the GPUs may now land on another NUMA node or PCIe root (keep alignment under DRA "
        "by asking for both in one claim with matchAttribute on the PCIe root or NUMA node, "
        "where both drivers publish it)",
    )
    MORE_DEVICES = (
        "more-devices",
        "translated",
        "initContainer {names}: no app container asks for as many {resource}, so it gets a "
        "claim of its own and the pod holds {claimed} devices where the device plugin gave it "
        "{before}",
    )
    NO_ROOM_FOR_RECORD = (
        "no-room-for-record",
        "translated",
        "the pod's annotations leave no room for {annotation}: re-applying its manifest will "
        "be refused",
    )
    # ---- notes: what a manifest's reader should know ----
    IN_TREE = ("in-tree", "left", "left to the in-tree extended-resource path: {why}")
    CONTROLLER_READS = (
        "controller-reads",
        "note",
        "{where}left as is: {why}; its pods are translated at admission (in a namespace where "
        "gpu2dra is enabled)",
    )
    OUTSIDE_POD_SPEC = (
        "outside-pod-spec",
        "note",
        "{place} asks for {resources} {inside}, so gpu2dra cannot give it claims here; the "
        "pods it becomes are translated at admission (in a namespace where gpu2dra is enabled)",
    )
    IN_STRING = (
        "in-string",
        "note",
        "{place} creates {kinds} from a manifest string whose pods ask for GPUs; gpu2dra does "
        "not rewrite manifests inside strings: the pods are translated at admission (in a "
        "namespace where gpu2dra is enabled)",
    )
    CRD_ASK = (
        "crd-ask",
        "note",
        "{place} asks for {what} ({owner}), which gpu2dra does not rewrite: the "
        "controller turns it into a device-plugin request in the pods it builds, which are "
        "translated at admission (in a namespace where gpu2dra is enabled)",
    )
    NO_RULE = (
        "no-rule",
        "note",
        "{kind} is a kind gpu2dra has no rule for: left as is (pod templates asking for "
        "GPUs: {where}), since its controller may read GPU counts from its pod specs or refuse "
        "resourceClaims in them; its pods are "
        "translated at admission (in a namespace where gpu2dra is enabled); name it in the "
        "policy's translateKinds to translate it here",
    )
    RAY_GPUS_SET = (
        "ray-gpus-set",
        "note",
        "{group}: rayStartParams.num-gpus set to {count!r}, the GPUs its Ray container asked "
        "for: KubeRay and the Ray autoscaler read the count from there once the limit is a "
        "claim",
    )
    RAY_GPUS_DIFFER = (
        "ray-gpus-differ",
        "note",
        "{group}: rayStartParams.num-gpus is {set!r} but the Ray container asked for {count} "
        "GPUs; Ray is started with num-gpus as set",
    )
    KUEUE = (
        "kueue",
        "note",
        "queued by Kueue (kueue.x-k8s.io/queue-name): its quota counts these GPUs as DRA "
        "claims only with its DRA gate on (DynamicResourceAllocation in v0.14-v0.17, off by "
        "default; KueueDRAIntegration from v0.18, on) and resources.deviceClassMappings in its "
        "configuration mapping DeviceClass {classes} to a resource the ClusterQueues give quota "
        "for (v0.17 refuses claims with CEL selectors); nvidia.com/gpu quota no longer counts "
        "them",
    )
    VOLCANO = (
        "volcano",
        "note",
        "scheduled by Volcano: its capacity plugin counts these GPUs as DRA claims only with "
        "capacity.DynamicResourceAllocationEnable set and queue capability, deserved and "
        "guarantee keys {keys}; nvidia.com/gpu in queue quotas no longer counts them",
    )
    KAI_QUEUE = (
        "kai-queue",
        "note",
        "queued by KAI Scheduler (kai.scheduler/queue): its queue quotas count the GPUs its "
        "pods ask for as nvidia.com/gpu or GPU fractions; check that its version counts DRA "
        "claims of {classes} before listing kai-scheduler in the policy's draSchedulers (pods "
        "it schedules are left on the device plugin until then)",
    )
    YUNIKORN_QUEUE = (
        "yunikorn-queue",
        "note",
        "queued by YuniKorn ({how}): its queues count the resources of the pods' containers, "
        "which DRA claims are not, so these GPUs would escape the queue's quota; pods YuniKorn "
        "schedules (schedulerName yunikorn, or a YuniKorn label or annotation) are left on the "
        "device plugin (draSchedulers)",
    )
    WOULD = ("would", "note", "would {what}")
    TOLERATION = (
        "toleration",
        "note",
        "toleration {resource} (operator Exists, effect NoSchedule) added: the "
        "ExtendedResourceToleration admission plugin gives it to pods that ask for {resource}, "
        "which this pod no longer does, and nodes tainted {resource}:NoSchedule take only pods "
        "that tolerate it (drop it where the cluster does not run the plugin)",
    )


class Finding(str):
    """A message of `code`, with its fields filled in: a string that knows its code."""

    code: Code

    def __new__(cls, code: Code, **fields: object) -> Finding:
        finding = super().__new__(cls, code.message.format(**fields))
        finding.code = code
        return finding

    def __reduce__(self) -> tuple[object, tuple[Code, str]]:
        return _found, (self.code, str(self))  # copied or pickled, it keeps text and code

    def of(self, where: str) -> Finding:
        """The same finding, said of `where`: one pod template of a document with several."""
        return _found(self.code, f"{where}: {self}")


def _found(code: Code, text: str) -> Finding:
    finding = str.__new__(Finding, text)
    finding.code = code
    return finding


def codes(findings: Iterable[str]) -> tuple[Code, ...]:
    """The codes of `findings`, each once, in order; text that is no Finding has none."""
    return tuple(dict.fromkeys(f.code for f in findings if isinstance(f, Finding)))
