"""The policy file: which legacy resources map to which DeviceClasses, and per-namespace modes."""

from __future__ import annotations

from collections.abc import Mapping as AnyMapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import yaml

from app.core.mapping import (
    PolicyError,
    ResourceMapping,
    expect,
    parse_mapping,
)

Mode = Literal["enabled", "audit", "disabled"]
OnError = Literal["allow", "deny"]
# A pod whose priority class can preempt: on Kubernetes 1.34-1.37 the scheduler preempts for
# device-plugin GPUs but not for DRA claims. Leave it on the device plugin, or translate it.
LeaveOrTranslate = Literal["leave", "translate"]

MODE_LABEL = "gpu2dra.io/migration"
# Domains whose pod annotations and node labels a GPU scheduler or the device plugin reads,
# besides the mapped resources' own: NVIDIA's (GFD labels, HAMi's nvidia.com/use-gputype)
# and HAMi's (hami.io/gpu-scheduler-policy, ...). Subdomains count as the domain.
WATCHED_DOMAINS = frozenset({"nvidia.com", "hami.io"})
SKIP_ANNOTATION = "gpu2dra.io/skip"
MODES: tuple[Mode, ...] = get_args(Mode)
ON_ERRORS: tuple[OnError, ...] = get_args(OnError)
LEAVE_OR_TRANSLATE: tuple[LeaveOrTranslate, ...] = get_args(LeaveOrTranslate)

DEFAULT_POLICY_YAML = """\
# Namespaces without the gpu2dra.io/migration label get this mode: migration is opt-in.
defaultMode: disabled
# When a template cannot be created: admit the pod unchanged with a warning, or deny it.
onError: allow
# Keep nodeSelector / node-affinity terms on GFD labels after turning them into CEL selectors.
keepNodeSelectors: false
# Pods in these namespaces are never changed (the webhook's own namespace is added at run time).
skipNamespaces: [kube-system]
# The DeviceClasses assumed to exist when gpu2dra runs without a cluster (offline mode).
deviceClasses: [gpu.nvidia.com, mig.nvidia.com]
# Each mapping's inTree says what to do where a DeviceClass also serves its resource in-tree
# (extendedResourceName, Kubernetes 1.36+): defer leaves a pod that gains nothing from
# translation (whole devices, no GFD node terms, no init container asking) to the scheduler;
# translate translates every pod. A mapping's `consumable` ({shares: 1, memory:
# nvidia.com/gpumem}) moves pods on time-sliced or MPS GPUs, and HAMi's memory fractions, onto
# devices several claims share, where the DRA driver publishes them (--consumable-shares).
mappings:
  nvidia.com/gpu:
    deviceClassName: gpu.nvidia.com
    inTree: defer
  # Mixed-strategy MIG: `*` is the MIG profile as the device plugin spells it (mig-1g.10gb.me),
  # `{profile}` the same profile as the DRA driver spells it (1g.10gb+me).
  nvidia.com/mig-*:
    deviceClassName: mig.nvidia.com
    nodeLabels: mig
    selectors:
      - "device.attributes['gpu.nvidia.com'].profile == '{profile}'"
# MIG single strategy (nvidia.com/gpu on a node whose GFD product is <model>-MIG-<profile>)
# is translated with this pattern mapping's class and selectors; `none` leaves such pods.
migSingle: nvidia.com/mig-*
# Pods whose priority class can preempt (priorityClassName, preemptionPolicy not Never): the
# scheduler does not preempt for DRA claims on Kubernetes 1.34-1.37 (KEP-5690), so leave keeps
# them on the device plugin, where they still preempt (where a class serves their resource
# in-tree, the scheduler can still give them DRA devices: outcome preempting-in-tree);
# translate moves them and says so.
preemptingPods: leave
# Pods Kueue queues through its pod or deployment integration, where that Kueue would not
# count their DRA claims against the ClusterQueue (its DRA gate off, a DeviceClass not in
# deviceClassMappings, CEL selectors it refuses): leave keeps them on the device plugin,
# counted as before; translate moves them and says so.
kueuePods: leave
# Pods whose claims no node could take: no ResourceSlice publishes a device of their
# DeviceClass and no node autoscaler can add a node with one (Karpenter skips pods with
# claims; Cluster Autoscaler adds DRA nodes from zero only with clusterapi). leave keeps them
# on the device plugin, where they run; translate moves them, Pending until a DRA node joins.
noDraCapacity: leave
# Pods whose node terms pin them to a cloud node pool or instance type (gke-nodepool,
# gke-accelerator, instance-type, karpenter.sh/nodepool, eks nodegroup, aks agentpool): such
# pools are most often device-plugin pools, and gpu2dra cannot tell one that runs the DRA
# driver. leave keeps them on the device plugin; translate moves them and says so.
cloudPools: leave
# The schedulers that allocate DRA claims: a GPU pod whose spec.schedulerName is another one
# is left as it is (unset is default-scheduler).
draSchedulers: [default-scheduler]
# The most ResourceClaimTemplates gpu2dra makes in one namespace: one a distinct shape of GPU
# request (class, count, selectors, sharing); a namespace runs a handful. A pod that needs one
# more is left on the device plugin with a warning (outcome template-limit); prune-templates
# makes room. It bounds what forged reviews or careless shapes can pile up in a namespace.
templatesPerNamespace: 100
# Annotations, node labels and extended resources in a GPU vendor's domain (nvidia.com,
# hami.io, the mapped resources' domains) that leave a pod untranslated unless listed here:
# exact keys, or prefixes ending in `*`. Only for keys the cluster knows change no GPU.
ignoreKeys: []
# Kinds no rule of gpu2dra's knows (group/Kind) whose pod specs `gpu2dra translate` rewrites in
# place; any other unknown kind is left as it is, its pods translated at admission. Only for
# kinds whose controller copies its pod templates into pods as written and reads no GPU count.
translateKinds: []
"""


# Every default is written once, in the YAML above: a field a policy file leaves out takes it.
DEFAULT: dict[str, Any] = yaml.safe_load(DEFAULT_POLICY_YAML)


@dataclass(frozen=True, slots=True)
class Policy:
    mappings: tuple[ResourceMapping, ...]
    default_mode: Mode = "disabled"
    on_error: OnError = "allow"
    keep_node_selectors: bool = False
    skip_namespaces: frozenset[str] = frozenset({"kube-system"})
    device_classes: tuple[str, ...] = ("gpu.nvidia.com", "mig.nvidia.com")
    # The pattern mapping MIG single-strategy pods are translated with; None leaves them.
    mig_single: ResourceMapping | None = None
    preempting_pods: LeaveOrTranslate = "leave"
    kueue_pods: LeaveOrTranslate = "leave"  # the same choice, for pods Kueue would not count
    # the same, for pods whose claims have no device to take and no autoscaler to add one
    no_dra_capacity: LeaveOrTranslate = "leave"
    cloud_pools: LeaveOrTranslate = "leave"  # and for pods pinned to a cloud node pool
    # The schedulers known to allocate DRA claims (spec.schedulerName; unset is the default).
    dra_schedulers: frozenset[str] = frozenset({"default-scheduler"})
    # Keys in a watched domain that leave no pod: exact, or prefixes ending in `*`.
    ignore_keys: tuple[str, ...] = ()
    # gpu2dra's templates a namespace may hold before a pod needing a new one is left
    templates_per_namespace: int = 100
    # Kinds no rule knows (group/Kind) that offline translation rewrites in place
    translate_kinds: frozenset[str] = frozenset()
    _exact: dict[str, ResourceMapping] = field(init=False, repr=False, compare=False)
    _prefixes: tuple[tuple[str, ResourceMapping], ...] = field(
        init=False, repr=False, compare=False
    )
    _any_prefix: tuple[str, ...] = field(init=False, repr=False, compare=False)
    # The domains of the mapped resources (nvidia.com): an unmapped resource of one of them
    # is the vendor's, and asks for something no mapping translates.
    vendor_domains: frozenset[str] = field(init=False, repr=False, compare=False)
    # Those and WATCHED_DOMAINS: where a pod annotation or node label gpu2dra does not
    # understand leaves the pod untranslated.
    watched_domains: frozenset[str] = field(init=False, repr=False, compare=False)
    _ignored: frozenset[str] = field(init=False, repr=False, compare=False)
    _ignored_prefixes: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        exact = {m.resource: m for m in self.mappings if not m.is_pattern}
        # Longest prefix first, so a specific pattern wins over a general one.
        prefixes = sorted(
            (m for m in self.mappings if m.is_pattern), key=lambda m: -len(m.resource)
        )
        object.__setattr__(self, "_exact", exact)
        object.__setattr__(self, "_prefixes", tuple((m.resource[:-1], m) for m in prefixes))
        object.__setattr__(self, "_any_prefix", tuple(m.resource[:-1] for m in prefixes))
        domains = frozenset(m.resource.split("/", 1)[0] for m in self.mappings)
        object.__setattr__(self, "vendor_domains", domains)
        object.__setattr__(self, "watched_domains", domains | WATCHED_DOMAINS)
        ignored = frozenset(k for k in self.ignore_keys if not k.endswith("*"))
        object.__setattr__(self, "_ignored", ignored)
        ignored_prefixes = tuple(k[:-1] for k in self.ignore_keys if k.endswith("*"))
        object.__setattr__(self, "_ignored_prefixes", ignored_prefixes)

    def watches(self, key: str) -> bool:
        """Whether `key` (an annotation, a node label, a resource) is in a watched domain and
        not ignored: gpu2dra must understand it, or leave the pod."""
        return self.in_watched_domain(key) and not self.ignores(key)

    def in_watched_domain(self, key: str) -> bool:
        domain, slash, _ = key.partition("/")
        return bool(slash) and (
            domain in self.watched_domains
            or any(domain.endswith("." + d) for d in self.watched_domains)
        )

    def ignores(self, key: str) -> bool:
        """Whether the policy's ignoreKeys names `key`."""
        return key in self._ignored or (
            bool(self._ignored_prefixes) and key.startswith(self._ignored_prefixes)
        )

    def mapping_for(self, resource: str) -> tuple[ResourceMapping, str] | None:
        """The mapping for `resource` and the text its `*` captured ("" for exact names)."""
        found = self._exact.get(resource)
        if found is not None:
            return found, ""
        if not resource.startswith(self._any_prefix):  # cpu, memory, ...: the common case
            return None
        for prefix, mapping in self._prefixes:
            if resource.startswith(prefix) and len(resource) > len(prefix):
                return mapping, resource[len(prefix) :]
        return None

    def with_skipped(self, *namespaces: str) -> Policy:
        return replace(self, skip_namespaces=self.skip_namespaces | set(namespaces))

    def mode_for(self, labels: AnyMapping[str, str] | None) -> Mode:
        """The namespace's mode: its label, else the cluster default. A misspelt label disables."""
        value = mode_label(labels)
        if value is None:
            return self.default_mode
        return value if value in MODES else "disabled"


def mode_label(labels: AnyMapping[str, str] | None) -> str | None:
    """The value of a namespace's gpu2dra.io/migration label; None without one."""
    return (labels or {}).get(MODE_LABEL)


Choice = TypeVar("Choice", bound=str)


def _choice(raw: AnyMapping[str, Any], key: str, choices: tuple[Choice, ...]) -> Choice:
    """raw[key], else its default, as the one of `choices` it is."""
    value = raw.get(key, DEFAULT[key])
    for choice in choices:
        if value == choice:
            return choice
    raise PolicyError(f"{key}: must be one of {', '.join(choices)}, not {value!r}")


KEYS = {
    "defaultMode",
    "onError",
    "keepNodeSelectors",
    "skipNamespaces",
    "deviceClasses",
    "mappings",
    "migSingle",
    "preemptingPods",
    "kueuePods",
    "noDraCapacity",
    "cloudPools",
    "draSchedulers",
    "ignoreKeys",
    "templatesPerNamespace",
    "translateKinds",
}


def parse_policy(raw: Any) -> Policy:
    expect(isinstance(raw, dict), "policy", "must be a YAML map")
    unknown = set(raw) - KEYS
    expect(not unknown, "policy", f"unknown field(s): {', '.join(sorted(unknown))}")
    # A field left out takes the embedded default, mappings too: a file that only says
    # `defaultMode: enabled` still translates nvidia.com/gpu.
    mappings = raw.get("mappings", DEFAULT["mappings"])
    expect(isinstance(mappings, dict), "mappings", "must be a map of resource name to mapping")
    keep = raw.get("keepNodeSelectors", DEFAULT["keepNodeSelectors"])
    expect(isinstance(keep, bool), "keepNodeSelectors", "must be true or false")
    skip = raw.get("skipNamespaces", DEFAULT["skipNamespaces"])
    expect(
        isinstance(skip, list) and all(isinstance(n, str) for n in skip),
        "skipNamespaces",
        "must be a list of namespace names",
    )
    classes = raw.get("deviceClasses", DEFAULT["deviceClasses"])
    expect(
        isinstance(classes, list) and all(isinstance(c, str) and c for c in classes),
        "deviceClasses",
        "must be a list of DeviceClass names",
    )
    parsed = tuple(parse_mapping(k, v) for k, v in mappings.items())
    found = Policy(
        mappings=parsed,
        default_mode=_choice(raw, "defaultMode", MODES),
        on_error=_choice(raw, "onError", ON_ERRORS),
        keep_node_selectors=keep,
        skip_namespaces=frozenset(skip),
        device_classes=tuple(classes),
        mig_single=_mig_single(raw.get("migSingle", DEFAULT["migSingle"]), parsed),
        preempting_pods=_choice(raw, "preemptingPods", LEAVE_OR_TRANSLATE),
        kueue_pods=_choice(raw, "kueuePods", LEAVE_OR_TRANSLATE),
        no_dra_capacity=_choice(raw, "noDraCapacity", LEAVE_OR_TRANSLATE),
        cloud_pools=_choice(raw, "cloudPools", LEAVE_OR_TRANSLATE),
        dra_schedulers=_dra_schedulers(raw.get("draSchedulers", DEFAULT["draSchedulers"])),
        ignore_keys=_ignore_keys(raw.get("ignoreKeys", DEFAULT["ignoreKeys"])),
        templates_per_namespace=_bound(
            raw.get("templatesPerNamespace", DEFAULT["templatesPerNamespace"])
        ),
        translate_kinds=_translate_kinds(raw.get("translateKinds", DEFAULT["translateKinds"])),
    )
    for key in found.ignore_keys:
        expect(
            found.in_watched_domain(key),
            f"ignoreKeys[{key!r}]",
            "ignores nothing: only keys in "
            f"{', '.join(sorted(found.watched_domains))} (or their subdomains) leave a pod",
        )
    return found


def _dra_schedulers(raw: Any) -> frozenset[str]:
    expect(
        isinstance(raw, list) and bool(raw) and all(isinstance(n, str) and n for n in raw),
        "draSchedulers",
        "must be a non-empty list of scheduler names (default-scheduler is the default one)",
    )
    return frozenset(raw)


def _bound(raw: Any) -> int:
    expect(
        type(raw) is int and raw >= 1,
        "templatesPerNamespace",
        f"must be a whole number of templates, 1 or more, not {raw!r}",
    )
    return int(raw)


def _translate_kinds(raw: Any) -> frozenset[str]:
    expect(isinstance(raw, list), "translateKinds", "must be a list of group/Kind")
    for kind in raw:
        group, slash, name = kind.partition("/") if isinstance(kind, str) else ("", "", "")
        expect(
            bool(group and slash and name) and "/" not in name,
            f"translateKinds[{kind!r}]",
            "must be a kind with its API group, without version: apps.kruise.io/CloneSet",
        )
    return frozenset(raw)


def _ignore_keys(raw: Any) -> tuple[str, ...]:
    expect(isinstance(raw, list), "ignoreKeys", "must be a list of keys")
    for key in raw:
        where = f"ignoreKeys[{key!r}]"
        expect(isinstance(key, str), where, "must be a string")
        domain, slash, name = key.partition("/")
        expect(
            bool(slash and domain) and "*" not in domain and "/" not in name,
            where,
            "must be a key with a domain (nvidia.com/numa-bind) or a prefix of one ending "
            "in `*` (hami.io/*)",
        )
        expect("*" not in name[:-1], where, "`*` may only end the key")
    return tuple(dict.fromkeys(raw))


def _mig_single(key: Any, mappings: tuple[ResourceMapping, ...]) -> ResourceMapping | None:
    if key == "none":
        return None
    patterns = {m.resource: m for m in mappings if m.is_pattern}
    if key == DEFAULT["migSingle"] and key not in patterns:
        return None  # mappings of its own without a MIG pattern: nothing to translate with
    expect(key in patterns, "migSingle", f"must be none or a pattern mapping, not {key!r}")
    return patterns[key]


def load_policy(path: Path | None) -> Policy:
    """The policy in `path`, or the embedded default when no path is given."""
    if path is None:
        return parse_policy(DEFAULT)
    try:
        text = path.read_text()
    except OSError as err:
        raise PolicyError(f"{path}: cannot read: {err.strerror}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise PolicyError(f"{path}: not valid YAML: {err}") from None
    try:
        return parse_policy(raw)
    except PolicyError as err:
        raise PolicyError(f"{path}: {err}") from None
