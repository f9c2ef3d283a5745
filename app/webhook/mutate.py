"""/mutate: a pod's legacy GPU requests become DRA claims, as a JSON patch of only what changed.

Pods of one shape (the replicas of a workload) are translated once. The cluster is reached
only through the `ClusterView` protocol: the same logic serves the live webhook, the offline
mode and the tests.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from app.core.catalog import Catalog
from app.core.failclosed import Annotations, watched_annotations, yunikorn_mark
from app.core.kube import Obj
from app.core.kueue import queued, selecting, uncounted
from app.core.outcomes import KUEUE_THEN, Code, Finding, codes
from app.core.patch import (
    ANNOTATIONS_LIMIT,
    RECORD_ANNOTATION,
    annotations_size,
    patch_ops,
    record,
    record_ops,
    revert_ops,
)
from app.core.policy import Mode, Policy
from app.core.quota import Use, quota_warning, unguarded
from app.core.resources import asks_extended_resources
from app.core.scope import skip_reason
from app.core.shape import shape_of
from app.core.templates import Owned, owned
from app.core.translate import describe, translate
from app.webhook.clusterview import ClusterView, TemplateError, TemplateSquatted
from app.webhook.logs import ASKER, Asker
from app.webhook.reviews import (
    AdmissionRequest,
    allowed,
    encode_patch,
    namespace_of,
    patched,
)
from app.webhook.verdicts import Decision, Verdict, allow, deny

# The API server prefixes an audit annotation's key with the webhook's name
# (pods.mutate.gpu2dra.io/would-translate) and drops a key that has a prefix of its own.
AUDIT_ANNOTATION = "would-translate"


MEMO_SIZE = 1024  # pod shapes remembered: a cluster runs far fewer distinct GPU workloads


@dataclass(frozen=True, slots=True, kw_only=True)
class Prepared:
    """What translating one shape of pod spec gives, prepared once for every pod of that
    shape."""

    catalog: Catalog  # the one it was computed with: a new catalog can change it
    warnings: tuple[Finding, ...]
    # The templates the patch references, each with the digest its live copy must have.
    templates: tuple[Owned, ...]
    # base64 JSON patches of the touched subtrees and the record of what they held, for a
    # pod with an annotations map and for one without; "" when nothing changes
    patch: str
    bare_patch: str
    # What the patch does, in words: audit mode's; worked out once, when first asked for.
    summary: Callable[[], str]
    uses: tuple[Use, ...] = ()  # (legacy resource, DeviceClass) the patch moves to DRA
    in_tree: str | None = None  # why the in-tree extended-resource path serves it instead
    record_size: int = 0  # bytes the record adds to the pod's annotations
    # the patch without the record, for a pod whose annotations have no room for it
    unrecorded: Callable[[], str] = str
    codes: tuple[Code, ...] = ()  # of the warnings: what metrics count
    capacities: tuple[str, ...] = ()  # legacy resources the patch makes consumable capacity
    selects: bool = False  # a template's request has CEL selectors


@dataclass(frozen=True, slots=True)
class Mutator:
    policy: Policy
    # shape_of(spec) -> Prepared: the pods of a Deployment or Job are translated once
    _memo: dict[bytes, Prepared] = field(default_factory=dict, init=False, compare=False)

    def __call__(self, request: AdmissionRequest, cluster: ClusterView) -> Decision:
        if request["kind"].get("kind") != "Pod" or request.get("subResource"):
            return allow()
        operation = request["operation"]
        if operation == "UPDATE":
            return reapplied(request)
        if operation != "CREATE":
            return allow()
        pod = request.get("object") or {}
        spec = pod.get("spec")
        # First, what most pods are: nothing for gpu2dra, whatever their namespace's mode.
        if not isinstance(spec, dict) or not asks_extended_resources(spec):
            return allow()
        namespace = namespace_of(request, pod)
        if skip_reason(pod, namespace, self.policy):
            return allow()
        if not cluster.ready:
            return self.failed(Finding(Code.NOT_SYNCED))
        mode = self.policy.mode_for(cluster.namespace_labels(namespace))
        if mode == "disabled":
            if cluster.offline:  # a first run's pod: say why it is left, once per answer
                unseen = Finding(Code.NAMESPACE_UNSEEN, namespace=namespace)
                return allow([unseen], (unseen.code,))
            return allow()
        metadata = pod.get("metadata")
        read = metadata.get("annotations") if isinstance(metadata, dict) else None
        watched = watched_annotations(read, self.policy)
        prepared = self.prepare(spec, cluster.catalog, watched, yunikorn_mark(metadata))
        if not prepared.patch:
            if mode == "audit" and prepared.in_tree:
                why = f"gpu2dra audit: would leave it to the in-tree path ({prepared.in_tree})"
                return allow([why, *prepared.warnings], prepared.codes)
            return allow(prepared.warnings, prepared.codes)
        # After the memo: the shape's translation is the same everywhere, its quotas are not.
        quotas = cluster.namespace_quotas(namespace)
        if quotas and (
            lifted := unguarded(prepared.uses, quotas, cluster.catalog, prepared.capacities)
        ):
            return self.kept_under_quota(mode, quota_warning(namespace, lifted))
        if cluster.kueue is not None and queued(metadata):
            then = KUEUE_THEN[self.policy.kueue_pods]
            classes = {c for _, c in prepared.uses}
            if held := uncounted(cluster.kueue, classes, prepared.selects, then):
                if self.policy.kueue_pods == "leave":
                    return self.kept_under_quota(mode, held)
                moved = Finding(Code.KUEUE_TRANSLATED, why=held)
                said = (*prepared.warnings, moved)
                prepared = replace(prepared, warnings=said, codes=(*prepared.codes, moved.code))
        if mode == "audit":
            summary = prepared.summary()
            warnings = [f"gpu2dra audit: would {summary}", *prepared.warnings]
            annotations = {AUDIT_ANNOTATION: summary[:2000]}
            answer = allowed(warnings, auditAnnotations=annotations)
            return Verdict("audit", answer, prepared.codes)
        verdict = recorded(pod, prepared)
        if request.get("dryRun") or cluster.has_templates(namespace, prepared.templates):
            return verdict
        # A new template: only while the namespace holds fewer of gpu2dra's than the bound.
        limit = self.policy.templates_per_namespace
        if (count := cluster.template_count(namespace)) >= limit:
            why = Finding(Code.TEMPLATE_LIMIT, namespace=namespace, count=count, limit=limit)
            return allow([why, *prepared.warnings], (why.code, *prepared.codes))
        user = (request.get("userInfo") or {}).get("username")
        asker = Asker(request["uid"], user if isinstance(user, str) else None)
        return self._after_templates(verdict, namespace, prepared, cluster, asker)

    def prepare(
        self,
        spec: Obj,
        catalog: Catalog,
        annotations: Annotations = (),
        yunikorn: str | None = None,
    ) -> Prepared:
        """translate() and its patch, remembered per pod shape; `annotations`: the pod's
        watched_annotations, all that translate() reads of them; `yunikorn`: what marks the
        pod for YuniKorn (yunikorn_mark)."""
        try:
            shape = shape_of(spec, annotations, yunikorn)
        except TypeError:  # orjson's: an integer JSON cannot hold; nothing to remember
            return self._translate(spec, catalog, annotations, yunikorn)
        known = self._memo.get(shape)
        if known is not None and known.catalog is catalog:
            return known
        prepared = self._translate(spec, catalog, annotations, yunikorn)
        if len(self._memo) >= MEMO_SIZE:
            del self._memo[next(iter(self._memo))]  # the oldest
        self._memo[shape] = prepared
        return prepared

    def _translate(
        self, spec: Obj, catalog: Catalog, annotations: Annotations, yunikorn: str | None
    ) -> Prepared:
        t = translate(spec, self.policy, catalog, dict(annotations), yunikorn=yunikorn)
        if not t.changed:
            said = (Code.IN_TREE, *codes(t.warnings)) if t.in_tree else codes(t.warnings)
            return Prepared(
                catalog=catalog,
                warnings=t.warnings,
                templates=(),
                patch="",
                bare_patch="",
                summary=str,
                in_tree=t.in_tree,
                codes=said,
            )
        try:
            ops, value = patch_ops(spec, t), record(spec, t.touched)
            patch = encode_patch([*ops, *record_ops(value, annotated=True)])
            bare_patch = encode_patch([*ops, *record_ops(value, annotated=False)])
        except TypeError:  # orjson's: an integer over 64 bits, or nested past 254 levels
            warnings = (*t.warnings, Finding(Code.NOT_JSON))
            return Prepared(
                catalog=catalog,
                warnings=warnings,
                templates=(),
                patch="",
                bare_patch="",
                summary=str,
                codes=codes(warnings),
            )
        return Prepared(
            catalog=catalog,
            warnings=t.warnings,
            templates=tuple(map(owned, t.templates)),
            patch=patch,
            bare_patch=bare_patch,
            summary=functools.cache(lambda: describe(spec, t)),
            uses=t.uses,
            record_size=len(RECORD_ANNOTATION) + len(value.encode()),
            unrecorded=functools.cache(lambda: encode_patch(ops)),
            codes=codes(t.warnings),
            selects=selecting(t.templates),
            capacities=t.capacities,
        )

    @staticmethod
    def kept_under_quota(mode: Mode, warning: Finding) -> Verdict:
        """Translating would lift a GPU quota: the pod stays on the device plugin."""
        text = f"gpu2dra audit: would not translate: {warning}" if mode == "audit" else warning
        return Verdict("quota", allowed([text]), (warning.code,))

    async def _after_templates(
        self,
        answer: Verdict,
        namespace: str,
        prepared: Prepared,
        cluster: ClusterView,
        asker: Asker,
    ) -> Verdict:
        token = ASKER.set(asker)  # each create's log line says whom it was made for
        try:
            await cluster.ensure_templates(namespace, prepared.templates)
        except TemplateSquatted as err:
            # Never a template gpu2dra did not make: its spec could ask for anything.
            return self.failed(Finding(Code.TEMPLATE_NOT_OURS, why=err), prepared.warnings)
        except TemplateError as err:
            return self.failed(Finding(Code.TEMPLATE_ERROR, why=err), prepared.warnings)
        finally:
            ASKER.reset(token)
        return answer

    def failed(self, why: Finding, warnings: tuple[Finding, ...] = ()) -> Verdict:
        """gpu2dra could not do its part: admit unchanged with a warning, or deny (onError)."""
        said = (why.code, *codes(warnings))
        if self.policy.on_error == "deny":
            return deny(why, code=503, warnings=warnings, codes=said)
        return allow([f"{why}; pod admitted unchanged", *warnings], said)


def recorded(pod: Obj, prepared: Prepared) -> Verdict:
    """The shape's patch for this pod, which records what it replaces in an annotation unless
    the pod's annotations leave no room for it."""
    metadata = pod.get("metadata")
    warnings = prepared.warnings
    if not isinstance(metadata, dict):  # never from the API server: nowhere to record
        return Verdict("patched", patched(prepared.unrecorded(), warnings), prepared.codes)
    annotations = metadata.get("annotations")
    if annotations is None:
        return Verdict("patched", patched(prepared.bare_patch, warnings), prepared.codes)
    if not isinstance(annotations, dict):  # the API server refuses it anyway
        return Verdict("patched", patched(prepared.unrecorded(), warnings), prepared.codes)
    if annotations_size(annotations) + prepared.record_size <= ANNOTATIONS_LIMIT:
        return Verdict("patched", patched(prepared.patch, warnings), prepared.codes)
    why = Finding(Code.NO_ROOM_FOR_RECORD, annotation=RECORD_ANNOTATION)
    answer = patched(prepared.unrecorded(), [*warnings, why])
    return Verdict("patched", answer, (*prepared.codes, why.code))


def reapplied(request: AdmissionRequest) -> Verdict:
    """An UPDATE of a translated pod that only brings back what gpu2dra replaced (its
    manifest applied again) is patched back to the live pod: a no-op, not a refused change."""
    old, new = request.get("oldObject"), request.get("object")
    if isinstance(old, dict) and isinstance(new, dict) and (ops := revert_ops(old, new)):
        try:
            return Verdict("reapplied", patched(encode_patch(ops)))
        except TypeError:  # orjson's: nested past what it writes; the API server judges it
            pass
    return allow()
