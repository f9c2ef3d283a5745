"""The tolerations the ExtendedResourceToleration admission plugin gives a pod, kept for one
translated offline.

The plugin (on in GKE and many other clusters) adds `{key: R, operator: Exists, effect:
NoSchedule}` for each extended resource R a container or init container requests (limits
count: the API server defaults requests from them first), so GPU nodes can be tainted
`nvidia.com/gpu:NoSchedule` and still take GPU pods that tolerate nothing themselves. A
translated pod asks for claims instead, and the plugin no longer gives it the toleration.

Only offline: at admission the plugin runs before every mutating webhook (AllOrderedPlugins in
kube-apiserver), so the pod gpu2dra sees already carries it where the plugin is on; where it is
off, the pod never had it, and adding one would let the pod onto nodes it could not reach.
"""

from __future__ import annotations

from typing import Any

from app.core.kube import Obj
from app.core.outcomes import Code, Finding
from app.core.resources import containers


def plugin_tolerations(before: Obj, after: Obj) -> tuple[Obj, list[Finding]]:
    """`after`, the translation of pod spec `before`, with the toleration the plugin would
    have given `before` for each extended resource the translation removed, and a note for
    each; `after` itself when none is added. The plugin's own rule decides: a toleration is
    added unless one of the same key, operator Exists, effect NoSchedule and no value is there
    (a broader toleration does not stop the plugin, so it does not stop this either)."""
    gone = sorted(_extended(before) - _extended(after))
    if not gone:
        return after, []
    tolerations = after.get("tolerations")
    if tolerations is None:
        tolerations = []
    elif not isinstance(tolerations, list):
        return after, []  # the API server refuses the pod anyway: leave it to say so
    added = [
        {"key": resource, "operator": "Exists", "effect": "NoSchedule"}
        for resource in gone
        if not any(_same(t, resource) for t in tolerations)
    ]
    if not added:
        return after, []
    notes = [Finding(Code.TOLERATION, resource=t["key"]) for t in added]
    return {**after, "tolerations": [*tolerations, *added]}, notes


def _extended(spec: Obj) -> set[str]:
    """The extended resources the containers and init containers of `spec` ask for, as the
    plugin reads them: names with a domain other than kubernetes.io's."""
    found: set[str] = set()
    for _, _, container in containers(spec):
        resources = container.get("resources")
        if not isinstance(resources, dict):
            continue
        for key in ("requests", "limits"):
            amounts = resources.get(key)
            if isinstance(amounts, dict):
                found.update(n for n in amounts if isinstance(n, str) and _is_extended(n))
    return found


def _is_extended(name: str) -> bool:
    # helper.IsExtendedResourceName: not native (no domain, or kubernetes.io's) and not a
    # quota name (requests.*).
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _same(toleration: Any, resource: str) -> bool:
    """Whether the plugin would find `toleration` already there (MatchToleration: key,
    operator, effect and value alike)."""
    return (
        isinstance(toleration, dict)
        and toleration.get("key") == resource
        and toleration.get("operator") == "Exists"
        and toleration.get("effect") == "NoSchedule"
        and toleration.get("value") in (None, "")
    )
