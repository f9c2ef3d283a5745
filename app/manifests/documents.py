"""Documents in, documents out: a YAML or JSON stream read, and every pod spec in it translated."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

import orjson
import yaml

from app.core.catalog import Catalog
from app.core.failclosed import yunikorn_mark
from app.core.kube import Obj
from app.core.outcomes import Code, Finding
from app.core.policy import Mode, Policy
from app.core.resources import containers, legacy_amounts, legacy_devices
from app.core.scope import never_changed
from app.core.translate import describe, translate
from app.manifests import asks as asks_module
from app.manifests import workloads, yamlio
from app.manifests.comments import Source
from app.manifests.podspecs import (
    MAX_DEPTH,
    TooDeep,
    pod_spec_places,
    pod_specs,
    rewrite_pod_specs,
    singular_containers,
)
from app.manifests.tolerations import plugin_tolerations

Read = tuple[Any, Source | None]  # a document and the text it was read from


class ManifestError(ValueError):
    """The input cannot be read; the message names the document."""


def load_documents(text: bytes | str, read: list[Read] | None = None) -> list[Any]:
    """The documents of a YAML or JSON stream (a JSON array is one document per item);
    empty documents dropped. A `List` stays one document: its items are translated in place.
    With `read`, each document and the Source it was read from (YAML) are appended to it."""
    raw = text.decode() if isinstance(text, bytes) else text
    if raw.lstrip().startswith(("{", "[")):
        try:
            docs = [orjson.loads(raw)]
        except orjson.JSONDecodeError as err:
            if "recursion" in str(err) or "depth limit" in str(err):  # as orjson words it
                raise ManifestError("document 1: nested too deeply") from None
            docs = None  # perhaps YAML flow style; let the YAML parser say what is wrong
        if docs is not None:
            _refuse_duplicate_keys(raw)
            out = _unpack(_as_json(docs))
            if read is not None:
                read.extend((doc, None) for doc in out)
            return out
    docs = []
    found: list[Source | None] | None = [] if read is not None else None
    try:
        docs.extend(yamlio.load_all(raw, found))
    except RecursionError:
        raise ManifestError(f"document {len(docs) + 1}: nested too deeply") from None
    except yamlio.TooComplex as err:
        raise ManifestError(f"document {len(docs) + 1}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        why = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ManifestError(f"document {len(docs) + 1}: not valid YAML{where}: {why}") from None
    out = _unpack(_as_json(docs))
    if read is not None:
        assert found is not None
        for doc, source in zip(docs, found or [None] * len(docs), strict=True):
            if isinstance(doc, list):
                read.extend((item, None) for item in doc)
            elif doc is not None:
                read.append((doc, source))
    return out


class _Duplicate(Exception):
    pass


def _refuse_duplicate_keys(raw: str) -> None:
    """Refuse JSON whose object sets a key twice, as the API server's strict decoding does
    (`duplicate field`): orjson keeps the last, and the first would silently go. Python's
    reader, each object's keys as a list, finds it (as fast as orjson reads the text); the
    YAML reader then says where, JSON being YAML's flow style."""
    said: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> None:
        if len(items) > 1 and len({key for key, _ in items}) < len(items):
            keys = [key for key, _ in items]
            said.append(next(k for i, k in enumerate(keys) if k in keys[:i]))
            raise _Duplicate
        # nothing is built: orjson has read the document already

    try:
        json.loads(raw, object_pairs_hook=pairs)
    except _Duplicate:
        pass
    except (ValueError, RecursionError):
        return  # what orjson reads and Python cannot (a depth past its limit) has no check
    if not said:
        return
    try:
        list(yamlio.load_all(raw))
    except yamlio.DuplicateKey as err:
        raise ManifestError(
            f"document 1: not valid JSON at line {err.again}: key {err.key!r} already set in "
            f"this object at line {err.first}"
        ) from None
    except (yaml.YAMLError, ValueError, RecursionError):
        pass  # JSON the YAML reader cannot read: said without its lines
    raise ManifestError(f"document 1: not valid JSON: key {said[0]!r} set twice in one object")


def _as_json(docs: list[Any]) -> list[Any]:
    """`docs`, if each is JSON as the output will write it: YAML also has binary, sets,
    non-string keys and any integer; JSON input can nest deeper than orjson writes."""
    for number, doc in enumerate(docs, 1):
        try:
            orjson.dumps(doc)
        except orjson.JSONEncodeError as err:
            why = "nested too deeply" if "recursion" in str(err).lower() else f"not JSON: {err}"
            raise ManifestError(f"document {number}: {why}") from None
    return docs


def _unpack(docs: list[Any]) -> list[Any]:
    out: list[Any] = []
    for doc in docs:
        if isinstance(doc, list):
            out.extend(doc)
        elif doc is not None:
            out.append(doc)
    return out


def is_list(doc: Any) -> bool:
    """A `kind: List` (or `PodList`, ...) as `kubectl get -o yaml` writes it."""
    return (
        isinstance(doc, dict)
        and isinstance(doc.get("kind"), str)
        and doc["kind"].endswith("List")
        and isinstance(doc.get("items"), list)
    )


class Note(NamedTuple):
    """What the translation of one document has to say: `document N (Kind name): text`."""

    document: int  # its position among the documents, from 1
    subject: str  # "Kind name"
    text: Finding

    def __str__(self) -> str:
        return f"document {self.document} ({self.subject}): {self.text}"


@dataclass
class Result:
    documents: list[Any] = field(default_factory=list)
    numbered: int = 0  # documents counted as warnings number them: a List's items each
    templates: dict[tuple[str | None, str], Obj] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)


def translate_documents(
    docs: list[Any],
    policy: Policy,
    catalog: Catalog,
    *,
    namespace: str | None,
    mode: Mode,
    offline: bool = False,
) -> Result:
    """Translate every pod spec in `docs`; the input is never changed. DeviceClasses among
    them join the catalog, as they would in the cluster the manifest is applied to.

    `offline`: the documents are applied later, as `gpu2dra translate` writes them, so a pod
    spec gains the tolerations the ExtendedResourceToleration admission plugin gave it for the
    resources it no longer asks for (tolerations.py); without it, what admission does."""
    result = Result()
    catalog = with_device_classes(catalog, docs)
    run = _Run(policy=policy, catalog=catalog, namespace=namespace, mode=mode, offline=offline)
    for doc in docs:
        if not is_list(doc):
            result.documents.append(_translate_one(doc, result, run))
            continue
        # A List stays a List: a `kubectl get -o yaml` dump comes back in its own shape.
        items = [_translate_one(i, result, run) for i in doc["items"]]
        same = all(a is b for a, b in zip(items, doc["items"], strict=True))
        result.documents.append(doc if same else {**doc, "items": items})
    return result


def with_device_classes(catalog: Catalog, docs: list[Any]) -> Catalog:
    """`catalog` and the DeviceClasses (resource.k8s.io) among `docs` and their List items."""
    items = (i for d in docs for i in (d["items"] if is_list(d) else [d]))
    found = [
        d
        for d in items
        if isinstance(d, dict)
        and d.get("kind") == "DeviceClass"
        and workloads.group_of(d) == "resource.k8s.io"
        and isinstance(d.get("metadata"), dict)
        and isinstance(d["metadata"].get("name"), str)
        and isinstance(d.get("spec") or {}, dict)
        and isinstance((d.get("spec") or {}).get("extendedResourceName", ""), str | None)
    ]
    if not found:
        return catalog
    return Catalog(MappingProxyType({**catalog.classes, **Catalog.from_objects(found).classes}))


class _Run(NamedTuple):
    """What every document of one translate_documents call is translated with."""

    policy: Policy
    catalog: Catalog
    namespace: str | None
    mode: Mode
    offline: bool


def _translate_one(doc: Any, result: Result, run: _Run) -> Any:
    policy, namespace, mode = run.policy, run.namespace, run.mode
    result.numbered += 1
    number = result.numbered
    if not isinstance(doc, dict):
        raise ManifestError(f"document {number}: not a Kubernetes object")
    metadata: Obj = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    ns = metadata.get("namespace") or namespace
    if not isinstance(ns, str | None):
        raise ManifestError(f"document {number}: metadata.namespace is not a string")
    kind, ident = (
        doc.get("kind", "object"),
        metadata.get("name") or metadata.get("generateName"),
    )
    subject = f"{kind} {ident}" if ident else str(kind)
    if mode == "disabled" or never_changed(ns, policy):
        return doc

    classes: list[str] = []  # of the claims this document's pods ask for
    said: set[str] = set()  # never the same line twice for one document

    def note(text: Finding) -> None:
        if text not in said:
            said.add(text)
            result.notes.append(Note(number, subject, text))

    labels: dict[int, str] = {}  # pod spec -> its template, where a document has several

    def one(spec: Obj, pod_metadata: Any) -> Obj:
        label = labels.get(id(spec))
        said_of = note if label is None else (lambda text: note(text.of(label)))
        return _translate_spec(
            spec, pod_metadata, note=said_of, ns=ns, run=run, result=result, classes=classes
        )

    def asks(container: Obj) -> list[str]:
        return sorted(legacy_amounts(container, policy))

    try:
        # A document of several pod specs (Master and Worker): each line names its template.
        places = pod_spec_places(doc)
        if len(places) > 1:
            labels.update((id(spec), place) for place, spec in places)
        if (reason := workloads.left_alone(doc)) is not None:
            if _asks_anywhere(doc, asks):
                note(Finding(Code.CONTROLLER_READS, where="", why=reason))
            return doc
        # Fail closed: a controller no rule knows may read GPU counts from its pod specs, or
        # refuse resourceClaims in them; its pods are translated at admission all the same.
        if workloads.known(doc) or workloads.translated_by_choice(doc, policy.translate_kinds):
            translated = _rewrite(doc, one, asks, note)
        else:
            translated = doc
            asking = [
                place
                for place, spec in pod_spec_places(doc)
                if any(asks(c) for _, _, c in containers(spec))
            ]
            if asking:
                where = ", ".join(dict.fromkeys(asking))
                note(Finding(Code.NO_RULE, kind=workloads.group_kind(doc), where=where))
        translated = workloads.keep_ray_gpus(doc, translated, note)
        for place, resources, held in singular_containers(doc, asks):
            inside = "in a container that is not in a pod spec" if held else "outside any pod spec"
            asked = ", ".join(resources)
            note(Finding(Code.OUTSIDE_POD_SPEC, place=place, resources=asked, inside=inside))
        for place, kinds in _embedded_asks(doc, policy):
            note(Finding(Code.IN_STRING, place=place, kinds=kinds))
        crd = asks_module.crd_asks(doc, lambda name: bool(asks(_limit(name))))
        for ask in crd:
            note(Finding(Code.CRD_ASK, place=ask.place, what=ask.what, owner=ask.owner))
        if crd and (how := workloads.yunikorn_queue(doc, pod_specs(doc))):
            note(Finding(Code.YUNIKORN_QUEUE, how=how))
    except TooDeep:
        deep = f"document {number} ({subject}): nested deeper than {MAX_DEPTH} levels"
        raise ManifestError(deep) from None
    if translated is not doc:
        specs = pod_specs(translated)
        for text in workloads.queue_notes(doc, translated, specs, sorted(set(classes))):
            note(text)
    return translated


def _rewrite(
    doc: Obj,
    one: Callable[[Obj, Any], Obj],
    asks: Callable[[Obj], list[str]],
    note: Callable[[Finding], None],
) -> Any:
    """The document with its pod specs translated, but for one its controller reads."""
    held = workloads.kept(doc)
    if held is None:
        return rewrite_pod_specs(doc, one)
    path, reason = held
    kept = workloads.at(doc, path)
    if _asks_anywhere(kept, asks):
        label = ".".join(str(step) for step in path)
        note(Finding(Code.CONTROLLER_READS, where=f"{label} ", why=reason))
    return workloads.rewrite_except(doc, path, lambda d: rewrite_pod_specs(d, one))


def _embedded_asks(doc: Obj, policy: Policy) -> list[tuple[str, str]]:
    """Manifests inside strings (Argo resource templates) whose pods ask for devices."""
    found = []
    for place, text in workloads.embedded_manifests(doc):
        domains = {m.resource.split("/", 1)[0] for m in policy.mappings}
        if len(text) > 1 << 20 or not any(domain in text for domain in domains):
            continue
        try:
            inner = [d for d in yamlio.load_all(text) if isinstance(d, dict)]
        except (yaml.YAMLError, ValueError, RecursionError):
            continue
        asking = [d for d in inner if any(legacy_devices(spec, policy) for spec in pod_specs(d))]
        if asking:
            kinds = ", ".join(f"a {d.get('kind', 'resource')}" for d in asking)
            found.append((place, kinds))
    return found


def _asks_anywhere(node: Any, asks: Callable[[Obj], list[str]]) -> bool:
    """Whether a container of a pod spec in `node`, or resources outside any, ask for GPUs."""
    if node is None:
        return False
    return _asks_in_pod_specs(node, asks) or bool(singular_containers(node, asks))


def _limit(resource: str) -> Obj:
    """A container asking for one of `resource`: to learn whether the policy maps it."""
    return {"name": "-", "resources": {"limits": {resource: 1}}}


def _asks_in_pod_specs(node: Any, asks: Callable[[Obj], list[str]]) -> bool:
    return any(asks(c) for spec in pod_specs(node) for _, _, c in containers(spec))


def _translate_spec(
    spec: Obj,
    pod_metadata: Any,
    *,
    note: Callable[[Finding], None],
    ns: str | None,
    run: _Run,
    result: Result,
    classes: list[str],
) -> Obj:
    policy, catalog, mode = run.policy, run.catalog, run.mode
    meta = pod_metadata if isinstance(pod_metadata, dict) else {}
    annotations = meta.get("annotations")
    annotations = annotations if isinstance(annotations, dict) else None
    t = translate(spec, policy, catalog, annotations, yunikorn=yunikorn_mark(meta))
    for warning in t.warnings:
        note(warning)
    if t.in_tree:
        note(Finding(Code.IN_TREE, why=t.in_tree))
    if not t.changed:
        return spec
    if mode == "audit":
        note(Finding(Code.WOULD, what=describe(spec, t)))
        return spec
    for tpl in t.templates:
        for request in tpl["spec"]["spec"]["devices"]["requests"]:
            if isinstance(name := request.get("exactly", {}).get("deviceClassName"), str):
                classes.append(name)
        meta = tpl["metadata"]
        out = (
            tpl
            if ns is None
            else {**tpl, "metadata": {"name": meta["name"], "namespace": ns, **meta}}
        )
        result.templates.setdefault((ns, tpl["metadata"]["name"]), out)
    if not run.offline:
        return t.spec
    # Applied later, the pod no longer gets the toleration ExtendedResourceToleration gave it.
    translated, tolerations = plugin_tolerations(spec, t.spec)
    for finding in tolerations:
        note(finding)
    return translated
