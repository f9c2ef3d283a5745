"""What gpu2dra answers to an admission request: the mutating and the validating verdicts.

The cluster is reached only through the `ClusterView` protocol, so the logic here is the same
for the live webhook, the offline mode and the tests.
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import orjson

from app.core.catalog import Catalog
from app.core.kube import RESOURCE_GROUP, Obj
from app.core.policy import SKIP_ANNOTATION, Policy
from app.core.translate import Path, Translation, asks_extended_resources, translate
from app.webhook.reviews import (
    AdmissionRequest,
    AdmissionResponse,
    allowed,
    denied,
    encode_patch,
    patched,
)

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
AUDIT_ANNOTATION = "gpu2dra.io/would-translate"


class TemplateError(Exception):
    """A ResourceClaimTemplate could not be made sure of (RBAC, API down, too slow)."""


class ReadFailed(Exception):
    """A referenced template or claim could not be read (API down, too slow, forbidden)."""


class ClusterView(Protocol):
    @property
    def catalog(self) -> Catalog: ...

    @property
    def ready(self) -> bool:
        """The caches have synced: namespace modes and the catalog can be trusted."""

    def namespace_labels(self, name: str) -> Mapping[str, str] | None: ...

    def has_templates(self, namespace: str, templates: Iterable[Obj]) -> bool:
        """Each template is known to exist in `namespace` (from the cache: no API call)."""

    async def ensure_templates(self, namespace: str, templates: Iterable[Obj]) -> None:
        """Make sure each template exists in `namespace`; raise TemplateError if not."""

    async def template_requests(self, namespace: str, name: str) -> list[Request] | None:
        """The (request, DeviceClass) pairs of a ResourceClaimTemplate; None if absent;
        ReadFailed if it could not be read."""

    async def claim_requests(self, namespace: str, name: str) -> list[Request] | None:
        """The (request, DeviceClass) pairs of a ResourceClaim; None if absent; ReadFailed if
        it could not be read."""


Request = tuple[str, str]  # request (or request/subrequest) name, DeviceClass name
# The answer, or, only when the API server must be asked first, a coroutine that gives it:
# most answers need no await, and so no timer for the deadline either.
Decision = AdmissionResponse | Coroutine[Any, Any, AdmissionResponse]


# ---- mutation ----------------------------------------------------------------------------

_MISSING: Any = object()


def _at(obj: Any, path: Path) -> Any:
    for step in path:
        try:
            obj = obj[step]
        except (KeyError, IndexError, TypeError):
            return _MISSING
    return obj


def _pointer(path: Path) -> str:
    return "/spec/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _namespace(request: AdmissionRequest, obj: Obj) -> str:
    """The request's namespace, else the object's own: "" when neither is a string."""
    metadata = obj.get("metadata")
    namespace = request.get("namespace") or (
        metadata.get("namespace") if isinstance(metadata, dict) else None
    )
    return namespace if isinstance(namespace, str) else ""


def patch_ops(spec: Obj, translation: Translation) -> list[Obj]:
    """JSON patch for the subtrees the translation replaced: no whole-pod diff."""
    ops: list[Obj] = []
    for path in translation.touched:
        old, new = _at(spec, path), _at(translation.spec, path)
        if new is _MISSING:
            ops.append({"op": "remove", "path": _pointer(path)})
        else:
            op = "add" if old is _MISSING else "replace"
            ops.append({"op": op, "path": _pointer(path), "value": new})
    return ops


MEMO_SIZE = 1024  # pod shapes remembered: a cluster runs far fewer distinct GPU workloads

# What translate() reads of a container: the rest (image, mounts, a per-pod volume name...)
# differs between replicas without changing their translation.
_READ = ("name", "resources", "restartPolicy", "env", "command", "args")


def shape_of(spec: Obj) -> bytes:
    """Everything translate() reads of a pod spec, as bytes: replicas of a workload share it."""
    parts: list[Any] = [spec.get("resourceClaims"), spec.get("nodeSelector"), spec.get("affinity")]
    for name in ("containers", "initContainers"):
        items = spec.get(name)
        if isinstance(items, list):
            items = [[c.get(k) for k in _READ] if isinstance(c, dict) else c for c in items]
        parts.append(items)
    return orjson.dumps(parts)


class Outcome(NamedTuple):
    """What translating one shape of pod spec gives, the same for every pod of that shape."""

    catalog: Catalog  # the one it was computed with: a new catalog can change it
    warnings: tuple[str, ...]
    templates: tuple[Obj, ...]
    patch: str  # base64 JSON patch of the touched subtrees; "" when nothing changes
    summary: str  # what the patch does, in words


@dataclass(frozen=True, slots=True)
class Mutator:
    policy: Policy
    # shape_of(spec) -> Outcome: the pods of a Deployment or Job are translated once
    _memo: dict[bytes, Outcome] = field(default_factory=dict, init=False, compare=False)

    def skip_reason(self, request: AdmissionRequest) -> str | None:
        if request["kind"].get("kind") != "Pod" or request.get("subResource"):
            return "not a pod"
        if request["operation"] != "CREATE":
            return "pod claims can only be set at creation"  # immutable after CREATE
        pod = request.get("object") or {}
        namespace = _namespace(request, pod)
        if namespace in self.policy.skip_namespaces:
            return f"namespace {namespace} is never changed"
        metadata = pod.get("metadata")
        annotations = (metadata.get("annotations") if isinstance(metadata, dict) else None) or {}
        if not isinstance(annotations, dict):
            return None
        if MIRROR_ANNOTATION in annotations:
            return "mirror pod"
        if annotations.get(SKIP_ANNOTATION) == "true":
            return f"annotated {SKIP_ANNOTATION}"
        return None

    def __call__(self, request: AdmissionRequest, cluster: ClusterView) -> Decision:
        uid = request["uid"]
        if self.skip_reason(request):
            return allowed(uid)
        pod = request.get("object") or {}
        namespace = _namespace(request, pod)
        if not cluster.ready:
            return self.failed(uid, "has not synced its caches yet")
        mode = self.policy.mode_for(cluster.namespace_labels(namespace))
        spec = pod.get("spec")
        if mode == "disabled" or not isinstance(spec, dict) or not asks_extended_resources(spec):
            return allowed(uid)
        outcome = self.outcome(spec, cluster.catalog)
        if not outcome.patch:
            return allowed(uid, outcome.warnings)
        if mode == "audit":
            return allowed(
                uid,
                [f"gpu2dra audit: would {outcome.summary}", *outcome.warnings],
                auditAnnotations={AUDIT_ANNOTATION: outcome.summary[:2000]},
            )
        answer = patched(uid, outcome.patch, outcome.warnings)
        if request.get("dryRun") or cluster.has_templates(namespace, outcome.templates):
            return answer
        return self._after_templates(answer, namespace, outcome, cluster)

    def outcome(self, spec: Obj, catalog: Catalog) -> Outcome:
        """translate() and its patch, remembered per pod shape."""
        try:
            shape = shape_of(spec)
        except TypeError:  # orjson's: an integer JSON cannot hold; nothing to remember
            return self._translate(spec, catalog)
        known = self._memo.get(shape)
        if known is not None and known.catalog is catalog:
            return known
        outcome = self._translate(spec, catalog)
        if len(self._memo) >= MEMO_SIZE:
            del self._memo[next(iter(self._memo))]  # the oldest
        self._memo[shape] = outcome
        return outcome

    def _translate(self, spec: Obj, catalog: Catalog) -> Outcome:
        t = translate(spec, self.policy, catalog)
        if not t.changed:
            return Outcome(catalog, t.warnings, t.templates, "", "")
        try:
            patch = encode_patch(patch_ops(spec, t))
        except TypeError:  # orjson's: only a spec not read from JSON can hold such a value
            why = "the pod spec holds a value JSON cannot carry; pod left as is"
            return Outcome(catalog, (*t.warnings, why), (), "", "")
        return Outcome(catalog, t.warnings, t.templates, patch, describe(spec, t))

    async def _after_templates(
        self, answer: AdmissionResponse, namespace: str, outcome: Outcome, cluster: ClusterView
    ) -> AdmissionResponse:
        try:
            await cluster.ensure_templates(namespace, outcome.templates)
        except TemplateError as err:
            return self.failed(
                answer["uid"], f"could not create ResourceClaimTemplates: {err}", outcome.warnings
            )
        return answer

    def failed(self, uid: str, why: str, warnings: Iterable[str] = ()) -> AdmissionResponse:
        """gpu2dra could not do its part: admit unchanged with a warning, or deny (onError)."""
        if self.policy.on_error == "deny":
            return denied(uid, f"gpu2dra {why}", code=503, warnings=warnings)
        return allowed(uid, [f"gpu2dra {why}; pod admitted unchanged", *warnings])


def describe(spec: Obj, translation: Translation) -> str:
    """One line saying what the translation does, for audit warnings and annotations."""
    before = len(spec.get("resourceClaims") or [])
    claims = translation.spec.get("resourceClaims", [])[before:]
    templates = {t["metadata"]["name"]: t for t in translation.templates}
    parts = []
    for claim in claims:
        tpl = templates[claim["resourceClaimTemplateName"]]
        exactly = tpl["spec"]["spec"]["devices"]["requests"][0]["exactly"]
        where = (
            " where " + " && ".join(s["cel"]["expression"] for s in exactly.get("selectors", []))
            if exactly.get("selectors")
            else ""
        )
        parts.append(
            f"claim {claim['name']}: {exactly['count']} x {exactly['deviceClassName']}{where} "
            f"(template {tpl['metadata']['name']})"
        )
    removed = [p[0] for p in translation.touched if p[0] in ("nodeSelector", "affinity")]
    text = "move GPU requests to DRA: " + "; ".join(parts) if parts else "drop zero GPU requests"
    if removed:
        text += f"; move GFD node terms in {', '.join(map(str, removed))} into device selectors"
    return text


# ---- validation --------------------------------------------------------------------------


def requests_of(claim_spec: Any) -> list[Request]:
    """(request name, DeviceClass) of a ResourceClaimSpec, for v1 (`exactly`, `firstAvailable`)
    and v1beta1 (flat `deviceClassName`) alike."""
    devices = claim_spec.get("devices") if isinstance(claim_spec, dict) else None
    requests = devices.get("requests") if isinstance(devices, dict) else None
    found: list[Request] = []
    for req in requests if isinstance(requests, list) else []:
        if not isinstance(req, dict):
            continue
        name = str(req.get("name", ""))
        exactly = req.get("exactly")
        flat = exactly if isinstance(exactly, dict) else req
        if isinstance(flat.get("deviceClassName"), str):
            found.append((name, flat["deviceClassName"]))
        subs = req.get("firstAvailable")
        for sub in subs if isinstance(subs, list) else []:
            if isinstance(sub, dict) and isinstance(sub.get("deviceClassName"), str):
                found.append((f"{name}/{sub.get('name', '')}", sub["deviceClassName"]))
    return found


def _missing(requests: list[Request], catalog: Catalog) -> list[Request]:
    return [(r, c) for r, c in requests if c not in catalog]


def validate(request: AdmissionRequest, cluster: ClusterView) -> Decision:
    uid = request["uid"]
    obj = request.get("object")
    kind = request["kind"]
    if request["operation"] not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        return allowed(uid)
    metadata: Obj = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
    namespace = _namespace(request, obj)
    name = request.get("name") or metadata.get("name") or metadata.get("generateName", "")
    what = f"{kind['kind']} {namespace}/{name}"
    spec: Obj = obj["spec"] if isinstance(obj.get("spec"), dict) else {}
    if kind.get("group") == RESOURCE_GROUP and kind["kind"] in (
        "ResourceClaimTemplate",
        "ResourceClaim",
    ):
        claim_spec = spec.get("spec") if kind["kind"] == "ResourceClaimTemplate" else spec
        for req, cls in _missing(requests_of(claim_spec), cluster.catalog):
            return denied(
                uid, f"{what}: request {req!r} names DeviceClass {cls!r}, which does not exist"
            )
        return allowed(uid)
    if kind["kind"] != "Pod" or request["operation"] != "CREATE":
        return allowed(uid)
    claims = spec.get("resourceClaims")
    if not isinstance(claims, list) or not claims:
        return allowed(uid)
    return _validate_pod_claims(uid, what, namespace, claims, cluster)


async def _validate_pod_claims(
    uid: str, what: str, namespace: str, claims: list[Any], cluster: ClusterView
) -> AdmissionResponse:
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
            return denied(
                uid,
                f"{what}: claim {claim.get('name')!r} uses {source}, whose request {req!r} "
                f"names DeviceClass {cls!r}, which does not exist",
            )
    return allowed(uid, warnings)
