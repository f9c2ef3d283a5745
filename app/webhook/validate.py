"""/validate: DRA objects and pods that name DeviceClasses which do not exist are refused
before they leave pods Pending forever; and gpu2dra's own name space for templates (its name
prefix, its managed-by label) is reserved to gpu2dra's identity."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from app.core.catalog import Catalog
from app.core.kube import MANAGED_BY, RESOURCE_GROUP, Obj
from app.core.resources import DraRequest, dra_requests
from app.core.templates import TEMPLATE_PREFIX, is_managed, is_reserved_name, written_as_named
from app.webhook.clusterview import ClusterView, ReadFailed
from app.webhook.reviews import AdmissionRequest, namespace_of
from app.webhook.verdicts import Decision, Verdict, allow, deny


def _missing(requests: list[DraRequest], catalog: Catalog) -> list[tuple[str, str]]:
    return [(r.name, r.device_class) for r in requests if r.device_class not in catalog]


_LABEL = "{}={}".format(*next(iter(MANAGED_BY.items())))


def reservation(request: AdmissionRequest, writers: Set[str]) -> str | None:
    """Why this CREATE or UPDATE of a ResourceClaimTemplate is refused: it carries gpu2dra's
    name prefix or label (before or after the change) and comes from an identity that is not
    gpu2dra's. None: allowed; so is everything when no identity is known to be gpu2dra."""
    if not writers:
        return None
    obj, old = request.get("object"), request.get("oldObject")
    if written_as_named(obj):
        # Content-addressed: exactly what gpu2dra writes under that name, whoever applies
        # it (`gpu2dra translate` output under GitOps). /mutate still uses a template only
        # when the full digest of its spec is what the pod's request needs.
        return None
    metadata = (obj or {}).get("metadata") if isinstance(obj, dict) else None
    metadata = metadata if isinstance(metadata, dict) else {}
    name = request.get("name") or metadata.get("name") or metadata.get("generateName")
    carries = [
        f"the name prefix {TEMPLATE_PREFIX!r}" if is_reserved_name(name) else "",
        f"the label {_LABEL}" if is_managed(obj) or is_managed(old) else "",
    ]
    if not any(carries):
        return None
    user_info = request.get("userInfo")
    user = user_info.get("username") if isinstance(user_info, dict) else None
    if isinstance(user, str) and user in writers:
        return None
    namespace = namespace_of(request, obj if isinstance(obj, dict) else {})
    return (
        f"ResourceClaimTemplate {namespace}/{name}: {' and '.join(filter(None, carries))} "
        f"are reserved to gpu2dra ({', '.join(sorted(writers))}), and {user!r} is not it: "
        "gpu2dra would use such a template for pods it translates, and this one is not "
        "exactly what gpu2dra writes under that name (as `gpu2dra translate` prints it, "
        "which anyone may apply). Choose another name and label (or ask the cluster admin to "
        "add the identity to the chart's claimTemplates.extraWriters)"
    )


def validate(
    request: AdmissionRequest, cluster: ClusterView, writers: Set[str] = frozenset()
) -> Decision:
    obj = request.get("object")
    kind = request["kind"]
    if request["operation"] not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        return allow()
    metadata: Obj = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    namespace = namespace_of(request, obj)
    name = request.get("name") or metadata.get("name") or metadata.get("generateName", "")
    what = f"{kind['kind']} {namespace}/{name}"
    spec: Obj = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    if kind.get("group") == RESOURCE_GROUP and kind["kind"] in (
        "ResourceClaimTemplate",
        "ResourceClaim",
    ):
        if kind["kind"] == "ResourceClaimTemplate":
            if why := reservation(request, writers):
                return deny(why)
            if request["operation"] == "UPDATE":
                return allow()  # the spec is immutable: its DeviceClasses were checked on create
        claim_spec = spec.get("spec") if kind["kind"] == "ResourceClaimTemplate" else spec
        for req, cls in _missing(dra_requests(claim_spec), cluster.catalog):
            return deny(f"{what}: request {req!r} names DeviceClass {cls!r}, which does not exist")
        return allow()
    if kind["kind"] != "Pod" or request["operation"] != "CREATE":
        return allow()
    claims = spec.get("resourceClaims")
    if not isinstance(claims, list) or not claims:
        return allow()
    return _validate_pod_claims(what, namespace, claims, cluster)


async def _validate_pod_claims(
    what: str, namespace: str, claims: list[Any], cluster: ClusterView
) -> Verdict:
    warnings = []
    for claim in claims:
        if not isinstance(claim, dict):
            continue
        if tpl := claim.get("resourceClaimTemplateName"):
            source, ref, read = f"ResourceClaimTemplate {tpl!r}", tpl, cluster.template_requests
        elif rc := claim.get("resourceClaimName"):
            source, ref, read = f"ResourceClaim {rc!r}", rc, cluster.claim_requests
        else:
            continue
        prefix = f"claim {claim.get('name')!r}: {source}"
        try:
            found = await read(namespace, str(ref))
        except ReadFailed as err:
            warnings.append(f"{prefix} could not be checked ({err}); pod allowed")
            continue
        if found is None:
            warnings.append(f"{prefix} does not exist yet")
            continue
        for req, cls in _missing(found, cluster.catalog):
            return deny(
                f"{what}: claim {claim.get('name')!r} uses {source}, whose request {req!r} "
                f"names DeviceClass {cls!r}, which does not exist",
            )
    return allow(warnings)
