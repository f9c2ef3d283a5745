"""The cluster's node autoscalers, and whether each can add nodes for pods with DRA claims.

A translated pod asks for claims, not `nvidia.com/gpu`: where no node publishes a device its
claims can take, only an autoscaler that simulates claims on the nodes it would add can give
it one. What each does, from its source (docs/concepts/capacity.md has the links):

- Karpenter (sigs.k8s.io/karpenter): `--ignore-dra-requests` (env IGNORE_DRA_REQUESTS),
  added in v1.7.0, defaults to true: a pod with claims is skipped ("not yet supported by
  Karpenter"). Before v1.7.0 claims are not looked at at all. With false (v1.14.0 and later
  simulate allocation) a new node has devices only if the cloud provider fills its instance
  types' `DynamicResources.ResourceSliceTemplates`, which the AWS, Azure and kwok providers
  do not do for gpu.nvidia.com (kubernetes-sigs/karpenter#3228,
  aws/karpenter-provider-aws#9519). So no Karpenter is counted as able: a provider that
  predicts devices is an operator's knowledge, said with the policy's noDraCapacity.
- Cluster Autoscaler (kubernetes/autoscaler): claims are simulated with
  `--enable-dynamic-resource-allocation` (default false before 1.35.0, locked to true from
  1.35.0); a node group at zero nodes gets devices only from a provider whose
  TemplateNodeInfo returns ResourceSlices: clusterapi, by the MachineSet or
  MachineDeployment annotation capacity.cluster-autoscaler.kubernetes.io/dra-driver
  (#7804, from 1.33.0), broken from 1.35.0 (#10199) and fixed by #10200 (August 2026, after
  1.36.1): so clusterapi from 1.37.0. A group with nodes already publishes devices, which
  capacity.py sees for itself.
- GKE's own autoscaler scales, for claims, node pools labelled
  cloud.google.com/gke-nvidia-gpu-dra-driver=true; read from the labels of the nodes such a
  pool has (a pool at zero nodes shows no Node).

Everything here reads plain dicts as the API returns them; nothing is fetched.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from app.core.kube import Obj, command_words, flag_values

Kind = Literal["karpenter", "cluster-autoscaler", "gke"]
Version = tuple[int, int, int]

# The label the charts put on their Deployment: Karpenter's chart (`karpenter.name`, the
# chart's name) and the cluster-autoscaler chart (`<cloudProvider>-cluster-autoscaler`); the
# plain manifests of Cluster Autoscaler's examples label it `app: cluster-autoscaler`.
NAME_LABEL = "app.kubernetes.io/name"
APP_LABEL = "app"
KARPENTER_NAMES = ("karpenter",)
CA_PROVIDERS = (
    "alicloud",
    "aws",
    "azure",
    "baiducloud",
    "brightbox",
    "civo",
    "cloudstack",
    "clusterapi",
    "digitalocean",
    "exoscale",
    "externalgrpc",
    "gce",
    "hetzner",
    "huaweicloud",
    "ionoscloud",
    "kamatera",
    "kwok",
    "linode",
    "magnum",
    "oci",
    "ovhcloud",
    "rancher",
    "scaleway",
    "tencentcloud",
    "volcengine",
    "vultr",
)
CA_NAMES = ("cluster-autoscaler", *(f"{p}-cluster-autoscaler" for p in CA_PROVIDERS))
# What a watch of Deployments selects: two selectors, since one cannot OR two label keys.
SELECTORS = (
    f"{NAME_LABEL} in ({','.join((*KARPENTER_NAMES, *CA_NAMES))})",
    f"{APP_LABEL} in (karpenter,cluster-autoscaler)",
)

IGNORE_DRA = "ignore-dra-requests"
IGNORE_DRA_ENV = "IGNORE_DRA_REQUESTS"
ENABLE_DRA = "enable-dynamic-resource-allocation"
KARPENTER_FLAG_SINCE: Version = (1, 7, 0)  # kubernetes-sigs/karpenter#2384
KARPENTER_SIMULATES_SINCE: Version = (1, 14, 0)  # kubernetes-sigs/karpenter#3113
CA_DRA_LOCKED_SINCE: Version = (1, 35, 0)  # the flag defaults to true and must stay so
CA_CLUSTERAPI_SINCE: Version = (1, 37, 0)  # the first minor after kubernetes/autoscaler#10200
CA_DRA_PROVIDERS = ("clusterapi",)
DRA_DRIVER_ANNOTATION = "capacity.cluster-autoscaler.kubernetes.io/dra-driver"
GKE_DRA_LABEL = "cloud.google.com/gke-nvidia-gpu-dra-driver"
GKE_POOL_LABEL = "cloud.google.com/gke-nodepool"


@dataclass(frozen=True, slots=True)
class NodeGroup:
    """A Cluster Autoscaler `--nodes=min:max:name` group."""

    name: str
    min: int
    max: int


@dataclass(frozen=True, slots=True)
class Autoscaler:
    """One node autoscaler as its objects say: what it is, and whether it can add nodes with
    devices for a pod whose claims no node can take now."""

    kind: Kind
    version: Version | None  # None: its image tag does not say
    adds_dra_nodes: bool
    reason: str  # one line: why (not), and what would change it
    where: str = ""  # namespace/name of its Deployment; GKE: the labelled pools
    provider: str = ""  # Cluster Autoscaler's --cloud-provider, Karpenter's from its image
    node_groups: tuple[NodeGroup, ...] = ()

    @property
    def shown(self) -> str:
        name = {"karpenter": "Karpenter", "cluster-autoscaler": "Cluster Autoscaler"}.get(
            self.kind, "GKE's cluster autoscaler"
        )
        if self.version is not None:
            name += " v" + ".".join(map(str, self.version))
        return f"{name} ({self.where})" if self.where else name

    @property
    def said(self) -> str:
        """The autoscaler and its reason, as a warning names it."""
        return f"{self.shown}: {self.reason}"


def _containers(deployment: Obj) -> list[Obj]:
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    found = spec.get("containers") if isinstance(spec, dict) else None
    return [c for c in found or [] if isinstance(c, dict)]


def _labels(obj: Obj) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return labels if isinstance(labels, dict) else {}


def _where(obj: Obj) -> str:
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}".strip("/")


_TAG = re.compile(r":v?(\d+)\.(\d+)\.(\d+)(?:[-+][^@:/]*)?(?:@.*)?$")


def version_of(image: str) -> Version | None:
    """(major, minor, patch) from an image tag (`...controller:1.8.1`, `...:v1.36.1@sha`)."""
    match = _TAG.search(image)
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


def flag(words: list[str], name: str, boolean: bool = False) -> str | None:
    """The last value of the flag `name`, as the process reads it (kube.flag_values)."""
    values = flag_values(words, name, boolean=boolean)
    return values[-1] if values else None


def env_value(container: Obj, name: str) -> str | None:
    """A literal env value; None when unset or set from elsewhere (valueFrom)."""
    for entry in container.get("env") or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            value = entry.get("value")
            return value if isinstance(value, str) else None
    return None


def _truth(value: str | None, *, default: bool) -> bool:
    return default if value is None else value.strip().lower() == "true"


def is_karpenter(deployment: Obj) -> bool:
    labels = _labels(deployment)
    if labels.get(NAME_LABEL) in KARPENTER_NAMES or labels.get(APP_LABEL) == "karpenter":
        return True
    return any("karpenter" in str(c.get("image") or "") for c in _containers(deployment))


def is_cluster_autoscaler(deployment: Obj) -> bool:
    labels = _labels(deployment)
    if labels.get(NAME_LABEL) in CA_NAMES or labels.get(APP_LABEL) == "cluster-autoscaler":
        return True
    return any("cluster-autoscaler" in str(c.get("image") or "") for c in _containers(deployment))


def _karpenter_provider(image: str) -> str:
    if "karpenter/controller" in image and "ecr.aws" in image:
        return "aws"
    if "aks/karpenter" in image or "azure" in image:
        return "azure"
    if "kwok" in image:
        return "kwok"
    return ""


def karpenter(deployment: Obj) -> Autoscaler:
    containers = _containers(deployment)
    named = [c for c in containers if c.get("name") == "controller"]
    controller = (named or containers or [{}])[0]
    image = str(controller.get("image") or "")
    at = version_of(image)
    provider = _karpenter_provider(image)

    def said(why: str) -> Autoscaler:  # no Karpenter counts as able: see the module's doc
        return Autoscaler(
            "karpenter",
            at,
            adds_dra_nodes=False,
            reason=why,
            where=_where(deployment),
            provider=provider,
        )

    if at is not None and at < KARPENTER_FLAG_SINCE:
        why = "before v1.7.0 Karpenter does not look at claims: the nodes it adds have no devices"
        return said(why)
    # The flag wins over the environment (BoolVarWithEnv: the env is the default).
    flagged = flag(command_words(controller), IGNORE_DRA, boolean=True)
    setting = flagged if flagged is not None else env_value(controller, IGNORE_DRA_ENV)
    if _truth(setting, default=True):
        how = "its default" if setting is None else "as set"
        why = (
            f"--{IGNORE_DRA} is true ({how}): it skips pods with claims (setting it false is "
            "not enough: the cloud provider "
            "must also predict gpu.nvidia.com devices for its instance types, which the AWS, "
            "Azure and kwok providers do not)"
        )
        return said(why)
    if at is not None and at < KARPENTER_SIMULATES_SINCE:
        why = f"--{IGNORE_DRA}=false before v1.14.0 does not simulate claims"
        return said(why)
    why = (
        f"--{IGNORE_DRA}=false, but a new node has devices only where its cloud provider "
        "predicts them for the instance type (ResourceSliceTemplates), which the AWS, Azure and "
        "kwok providers do not do for gpu.nvidia.com; where yours does, set the policy's "
        "noDraCapacity: translate"
    )
    return said(why)


def node_groups(words: list[str]) -> tuple[NodeGroup, ...]:
    """The `--nodes=min:max:name` groups (AWS's longer min:max:type:region:name too)."""
    found = []
    for value in flag_values(words, "nodes"):
        parts = value.split(":")
        if len(parts) >= 3 and parts[0].isdigit() and parts[1].isdigit():
            found.append(NodeGroup(parts[-1], int(parts[0]), int(parts[1])))
    return tuple(found)


def cluster_autoscaler(deployment: Obj) -> Autoscaler:
    containers = _containers(deployment)
    named = [c for c in containers if "cluster-autoscaler" in str(c.get("image") or "")]
    container = (named or containers or [{}])[0]
    at = version_of(str(container.get("image") or ""))
    words = command_words(container)
    provider = flag(words, "cloud-provider") or ""
    groups = node_groups(words)

    def said(why: str, *, adds: bool) -> Autoscaler:
        return Autoscaler(
            "cluster-autoscaler",
            at,
            adds_dra_nodes=adds,
            reason=why,
            where=_where(deployment),
            provider=provider,
            node_groups=groups,
        )

    enabled = at is not None and at >= CA_DRA_LOCKED_SINCE
    enabled = enabled or _truth(flag(words, ENABLE_DRA, boolean=True), default=False)
    if not enabled:
        why = (
            f"--{ENABLE_DRA} is off (its default before 1.35.0): it does not simulate claims "
            "(turn it on, with the clusterapi provider, 1.37.0 or later)"
        )
        return said(why, adds=False)
    if provider not in CA_DRA_PROVIDERS:
        why = (
            f"its cloud provider {provider or 'unset'!r} predicts no devices for a node group "
            "at zero nodes (only clusterapi does, with the annotation "
            f"{DRA_DRIVER_ANNOTATION}); a group with a DRA node already publishes devices"
        )
        return said(why, adds=False)
    if at is None or at < CA_CLUSTERAPI_SINCE:
        why = (
            "clusterapi scale-from-zero for claims is broken before the fix of "
            "kubernetes/autoscaler#10200 (#10199): upgrade to 1.37.0 or later"
        )
        return said(why, adds=False)
    why = (
        f"clusterapi adds DRA nodes to node groups annotated {DRA_DRIVER_ANNOTATION} "
        "(a group without it gets none)"
    )
    return said(why, adds=True)


def gke(nodes: Iterable[Obj]) -> Autoscaler | None:
    """GKE's autoscaler as its nodes' labels show it; None when no node is GKE's DRA pool's."""
    pools = sorted(
        {
            str(labels.get(GKE_POOL_LABEL) or "?")
            for node in nodes
            if (labels := _labels(node)).get(GKE_DRA_LABEL) == "true"
        }
    )
    if not pools:
        return None
    why = f"node pool {', '.join(pools)} is labelled {GKE_DRA_LABEL}=true: it scales it for claims"
    return Autoscaler(
        "gke", None, adds_dra_nodes=True, reason=why, where="pool " + ", ".join(pools)
    )


def of(deployment: Obj) -> Autoscaler | None:
    """The autoscaler a Deployment runs; None when it runs none (what a watch cache keeps)."""
    if is_karpenter(deployment):
        return karpenter(deployment)
    if is_cluster_autoscaler(deployment):
        return cluster_autoscaler(deployment)
    return None


def ordered(found: Iterable[Autoscaler]) -> tuple[Autoscaler, ...]:
    """Each once, in a stable order (the same set makes the same catalog)."""
    return tuple(sorted(set(found), key=lambda a: (a.kind, a.where)))


def read(deployments: Iterable[Obj], nodes: Iterable[Obj] = ()) -> tuple[Autoscaler, ...]:
    """Every node autoscaler the Deployments and nodes show, each once, in a stable order."""
    found = [a for a in map(of, deployments) if a is not None]
    if (google := gke(nodes)) is not None:
        found.append(google)
    return ordered(found)
