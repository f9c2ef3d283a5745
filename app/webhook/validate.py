"""/validate: DRA objects and pods that name DeviceClasses which do not exist are refused
before they leave pods Pending forever."""

from __future__ import annotations

from typing import Any

from app.core.catalog import Catalog
from app.core.kube import RESOURCE_GROUP, Obj
from app.core.resources import DraRequest, dra_requests
from app.webhook.clusterview import ClusterView, ReadFailed
from app.webhook.reviews import AdmissionRequest, namespace_of
from app.webhook.verdicts import Decision, Verdict, allow, deny


def _missing(requests: list[DraRequest], catalog: Catalog) -> list[tuple[str, str]]:
    return [(r.name, r.device_class) for r in requests if r.device_class not in catalog]


def validate(request: AdmissionRequest, cluster: ClusterView) -> Decision:
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
