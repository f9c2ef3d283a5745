"""`gpu2dra quota -n NS | kubectl apply -f -`: the DRA-side ResourceQuotas that keep translated
pods under the namespace's legacy GPU quotas.

For each ResourceQuota that limits a mapped legacy resource (`requests.nvidia.com/gpu: 4`),
one named `gpu2dra-dra-<name>` limits the devices of the class it maps to
(`gpu.nvidia.com.deviceclass.resource.k8s.io/devices: 4`). Printed, never applied: review it,
apply it, or keep it in Git. Read from the cluster (GETs only) or from a file.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterable

import yaml

from app.core.policy import Policy, load_policy
from app.core.quota import Quota, capacity_resources, is_mirror, legacy_resource, legacy_use, mirror
from app.readers.client import Reader, ReadError, connect, namespaced
from app.readers.registrations import cluster_policy

HEADER = (
    "# DRA-side ResourceQuotas from gpu2dra: each limits the devices of translated pods'\n"
    "# claims as the legacy quota it is named after limits nvidia.com/gpu-style requests.\n"
)


def render(quotas: Iterable[tuple[str, Quota]], policy: Policy) -> str:
    """Multi-document YAML for `kubectl apply -f -`, a comment above each quota."""
    by_namespace: dict[str, list[Quota]] = defaultdict(list)
    for namespace, quota in quotas:
        by_namespace[namespace].append(quota)
    docs = []
    capacities = capacity_resources(policy)
    for namespace in sorted(by_namespace):
        found = by_namespace[namespace]
        for quota in sorted(found, key=lambda q: q.name):
            if is_mirror(quota):
                continue
            docs.extend(_unmirrored(namespace, quota, capacities))
            # A class another quota limits is left alone; gpu2dra's own are printed again.
            others = {k for o in found if o is not quota and not is_mirror(o) for k in o.hard}
            made = mirror(namespace, quota, policy, others)
            if made is None:
                continue
            legacy = ", ".join(
                f"{k}: {v}" for k, v in sorted(quota.hard.items()) if legacy_use(k, policy)
            )
            lines = [f"# {namespace}/{quota.name} limits {legacy}"]
            lines += [f"# note: {n}" for n in made.notes]
            docs.append("\n".join(lines) + "\n" + yaml.safe_dump(made.quota, sort_keys=False))
    if not docs:
        return HEADER + "# no legacy GPU quota to mirror: nothing to apply\n"
    return HEADER + "".join(f"---\n{d}" for d in docs)


def _unmirrored(namespace: str, quota: Quota, capacities: frozenset[str]) -> list[str]:
    """A comment for each key that limits a resource gpu2dra turns into consumable capacity:
    no DRA-side quota counts capacity, so pods asking for it stay under this one."""
    keys = sorted(k for k in quota.hard if legacy_resource(k) in capacities)
    return [
        f"# {namespace}/{quota.name} limits {k}: {quota.hard[k]}; no DRA-side quota counts "
        "consumable capacity, so pods that ask for it stay on the device plugin under it\n"
        for k in keys
    ]


def read_cluster(reader: Reader, namespace: str | None) -> list[tuple[str, Quota]]:
    items = reader.items(namespaced("/api/v1", "resourcequotas", namespace))
    return [(str(o["metadata"].get("namespace", "")), Quota.of(o)) for o in items]


def read_file(path: str, namespace: str | None) -> list[tuple[str, Quota]]:
    """ResourceQuotas from YAML (documents, or `kind: List` as `kubectl get -o yaml` gives)."""
    try:
        with open(path, encoding="utf-8") if path != "-" else sys.stdin as file:
            docs = list(yaml.safe_load_all(file))
    except (OSError, yaml.YAMLError) as err:
        raise ReadError(f"{path}: {err}") from None
    found = []
    for doc in docs:
        items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
        for obj in items or []:
            if isinstance(obj, dict) and obj.get("kind") == "ResourceQuota":
                ns = (obj.get("metadata") or {}).get("namespace") or namespace or "default"
                if namespace is None or ns == namespace:
                    found.append((str(ns), Quota.of(obj)))
    return found


def main(args: argparse.Namespace) -> int:
    namespace = None if args.all_namespaces else (args.namespace or "default")
    if args.filename:
        policy = load_policy(args.policy)
        quotas = read_file(args.filename, None if args.all_namespaces else args.namespace)
    else:
        reader = connect(args.kubeconfig)
        policy, _ = cluster_policy(reader, args.policy)
        quotas = read_cluster(reader, namespace)
    sys.stdout.write(render(quotas, policy))
    return 0
