"""Manifests of any kind, translated offline: the engine of `/translate` and `gpu2dra translate`.

Pod specs are found by shape, not by kind, so Deployments, Jobs, CronJobs and custom resources
that embed pod templates (Kubeflow, Ray, JobSet, LeaderWorkerSet...) are all covered.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson
import yaml

from app import yamlio
from app.admission import describe
from app.catalog import Catalog
from app.kube import Obj
from app.policy import SKIP_ANNOTATION, Mode, Policy
from app.translate import translate

MAX_DEPTH = 64


class ManifestError(ValueError):
    """The input cannot be read; the message names the document."""


def load_documents(text: bytes | str) -> list[Any]:
    """The documents of a YAML or JSON stream, a `List` unpacked; empty documents dropped."""
    raw = text.decode() if isinstance(text, bytes) else text
    if raw.lstrip().startswith(("{", "[")):
        try:
            docs = [orjson.loads(raw)]
        except orjson.JSONDecodeError as err:
            if "recursion" in str(err) or "depth limit" in str(err):  # as orjson words it
                raise ManifestError("document 1: nested too deeply") from None
            docs = None  # perhaps YAML flow style; let the YAML parser say what is wrong
        if docs is not None:
            return _unpack(_as_json(docs))
    docs = []
    try:
        docs.extend(yamlio.load_all(raw))
    except RecursionError:
        raise ManifestError(f"document {len(docs) + 1}: nested too deeply") from None
    except yamlio.TooComplex as err:
        raise ManifestError(f"document {len(docs) + 1}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        why = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ManifestError(f"document {len(docs) + 1}: not valid YAML{where}: {why}") from None
    return _unpack(_as_json(docs))


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
        elif (
            isinstance(doc, dict)
            and isinstance(doc.get("kind"), str)
            and doc["kind"].endswith("List")
            and isinstance(doc.get("items"), list)
        ):
            out.extend(doc["items"])
        elif doc is not None:
            out.append(doc)
    return out


def _is_pod_spec(node: Obj) -> bool:
    containers = node.get("containers")
    return (
        isinstance(containers, list)
        and bool(containers)
        and all(isinstance(c, dict) and "name" in c for c in containers)
    )


@dataclass
class Result:
    documents: list[Any] = field(default_factory=list)
    templates: dict[tuple[str | None, str], Obj] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _skipped(metadata: Any) -> bool:
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    return isinstance(annotations, dict) and annotations.get(SKIP_ANNOTATION) == "true"


def translate_documents(
    docs: list[Any], policy: Policy, catalog: Catalog, namespace: str | None, mode: Mode
) -> Result:
    """Translate every pod spec in `docs`; the input is never changed."""
    result = Result()
    for number, doc in enumerate(docs, 1):
        if not isinstance(doc, dict):
            raise ManifestError(f"document {number}: not a Kubernetes object")
        metadata: Obj = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
        ns = metadata.get("namespace") or namespace
        if not isinstance(ns, str | None):
            raise ManifestError(f"document {number}: metadata.namespace is not a string")
        ident = metadata.get("name") or metadata.get("generateName") or f"#{number}"
        name = f"document {number} ({doc.get('kind', 'object')} {ident})"
        skip = mode == "disabled" or ns in policy.skip_namespaces
        result.documents.append(
            doc if skip else _walk(doc, name, ns, policy, catalog, mode, result, False, 0)
        )
    return result


def _walk(
    node: Any,
    name: str,
    ns: str | None,
    policy: Policy,
    catalog: Catalog,
    mode: Mode,
    result: Result,
    skip: bool,
    depth: int,
) -> Any:
    """`node` with its pod specs translated: copies only along the paths that change."""
    if depth > MAX_DEPTH:
        raise ManifestError(f"{name}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(node, list):
        items = [_walk(v, name, ns, policy, catalog, mode, result, skip, depth + 1) for v in node]
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    if not isinstance(node, dict):
        return node
    if _is_pod_spec(node):
        if skip:
            return node
        t = translate(node, policy, catalog)
        result.warnings.extend(f"{name}: {w}" for w in t.warnings)
        if not t.changed:
            return node
        if mode == "audit":
            result.warnings.append(f"{name}: would {describe(node, t)}")
            return node
        for tpl in t.templates:
            meta = tpl["metadata"]
            out = (
                tpl
                if ns is None
                else {**tpl, "metadata": {"name": meta["name"], "namespace": ns, **meta}}
            )
            result.templates.setdefault((ns, tpl["metadata"]["name"]), out)
        return t.spec
    # A pod template's own metadata can opt out (gpu2dra.io/skip) like a pod's.
    skip = skip or (_skipped(node.get("metadata")) and isinstance(node.get("spec"), dict))
    changed = {}
    for key, value in node.items():
        new = _walk(value, name, ns, policy, catalog, mode, result, skip, depth + 1)
        if new is not value:
            changed[key] = new
    return {**node, **changed} if changed else node


def iter_output(result: Result) -> Iterator[Any]:
    """The translated documents in input order, then each generated template once."""
    yield from result.documents
    yield from result.templates.values()


def to_yaml(docs: Iterator[Any] | list[Any]) -> str:
    return yamlio.dump_all(docs)


def to_json(result: Result) -> bytes:
    return orjson.dumps(
        {
            "documents": result.documents,
            "templates": list(result.templates.values()),
            "warnings": result.warnings,
        }
    )
