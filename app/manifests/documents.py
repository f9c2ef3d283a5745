"""Manifests of any kind, translated offline: the engine of `/translate` and `gpu2dra translate`.

Pod specs are found by shape, not by kind, so Deployments, Jobs, CronJobs and custom resources
that embed pod templates (Kubeflow, Ray, JobSet, LeaderWorkerSet...) are all covered.
"""

from __future__ import annotations

import itertools
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any, Literal, NamedTuple

import orjson
import yaml

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.policy import SKIP_ANNOTATION, Mode, Policy
from app.core.translate import translate
from app.manifests import yamlio
from app.webhook.mutate import describe

MAX_DEPTH = yamlio.MAX_DEPTH


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
    except (ValueError, OverflowError) as err:  # a tag that fits a value that does not: 2024-01-51
        raise ManifestError(f"document {len(docs) + 1}: not valid YAML: {err}") from None
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


def is_pod_spec(node: Obj) -> bool:
    """A pod spec, found by shape: a non-empty list of named containers."""
    containers = node.get("containers")
    return (
        isinstance(containers, list)
        and bool(containers)
        and all(isinstance(c, dict) and "name" in c for c in containers)
    )


class Note(NamedTuple):
    """What the translation of one document has to say: `document N (Kind name): text`."""

    document: int  # its position among the documents, from 1
    subject: str  # "Kind name"
    text: str

    def __str__(self) -> str:
        return f"document {self.document} ({self.subject}): {self.text}"


@dataclass
class Result:
    documents: list[Any] = field(default_factory=list)
    templates: dict[tuple[str | None, str], Obj] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)


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
        kind, ident = (
            doc.get("kind", "object"),
            metadata.get("name") or metadata.get("generateName"),
        )
        where = Note(number, f"{kind} {ident}" if ident else str(kind), "")
        skip = mode == "disabled" or ns in policy.skip_namespaces
        result.documents.append(
            doc if skip else _walk(doc, where, ns, policy, catalog, mode, result, False, 0)
        )
    return result


def _walk(
    node: Any,
    where: Note,
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
        raise ManifestError(str(where._replace(text=f"nested deeper than {MAX_DEPTH} levels")))
    if isinstance(node, list):
        items = [_walk(v, where, ns, policy, catalog, mode, result, skip, depth + 1) for v in node]
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    if not isinstance(node, dict):
        return node
    if is_pod_spec(node):
        if skip:
            return node
        t = translate(node, policy, catalog)
        result.notes.extend(where._replace(text=w) for w in t.warnings)
        if not t.changed:
            return node
        if mode == "audit":
            result.notes.append(where._replace(text=f"would {describe(node, t)}"))
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
        new = _walk(value, where, ns, policy, catalog, mode, result, skip, depth + 1)
        if new is not value:
            changed[key] = new
    return {**node, **changed} if changed else node


# ---- manifests in, text out, large streams over several processes -----------------------

Output = Literal["yaml", "json"]
PARALLEL_BYTES = 1 << 20  # below this, starting workers costs more than they save
_MARKER = re.compile(r"^---(?=[ \t\r\n]|$)", re.MULTILINE)  # a document start


class Rendered(NamedTuple):
    """A translated manifest as text: the documents in input order, then each generated
    template once (YAML), or `{documents, templates, warnings}` (JSON)."""

    body: bytes
    warnings: list[str]


class _Piece(NamedTuple):
    documents: int
    body: bytes  # the documents, rendered
    templates: dict[tuple[str | None, str], Obj]
    notes: list[Note]


def translate_text(
    text: str,
    policy: Policy,
    catalog: Catalog,
    namespace: str | None,
    mode: Mode,
    output: Output,
    jobs: int = 1,
    min_bytes: int = PARALLEL_BYTES,
) -> Rendered:
    """Load, translate and render a manifest. A large YAML stream is cut at its document
    markers, and `jobs` processes read, translate and render the pieces. Any error (or a
    worker lost) reruns it all in this process, so that the message is the usual one."""
    pieces = _pieces(text, jobs * 2) if jobs > 1 and len(text) >= min_bytes else []
    if len(pieces) > 1:
        job = (policy, catalog, namespace, mode, output)
        try:
            # fork: the workers inherit the policy and catalog instead of unpickling them
            with ProcessPoolExecutor(
                jobs, mp_context=get_context("fork"), initializer=_take_job, initargs=(job,)
            ) as pool:
                return _join(list(pool.map(_translate_piece, pieces)), output)
        except Exception:
            pass  # the rerun below reports it
    return _join([_piece(text, policy, catalog, namespace, mode, output)], output)


def _pieces(text: str, count: int) -> list[str]:
    """`text` cut into about `count` streams of whole documents. Directives (%YAML, %TAG)
    belong to the document after them and anchors may be used across documents: such a
    stream (or JSON) stays whole."""
    if text.lstrip().startswith(("{", "[", "%")) or "\n%" in text or "&" in text:
        return [text]
    cuts = [0]
    for i in range(1, count):
        marker = _MARKER.search(text, max(cuts[-1] + 1, len(text) * i // count))
        if marker is None:
            break
        cuts.append(marker.start())
    cuts.append(len(text))
    return [text[a:b] for a, b in itertools.pairwise(cuts) if a < b]


def _piece(
    text: str, policy: Policy, catalog: Catalog, namespace: str | None, mode: Mode, output: Output
) -> _Piece:
    result = translate_documents(load_documents(text), policy, catalog, namespace, mode)
    if output == "json":
        body = b",".join(orjson.dumps(doc) for doc in result.documents)
    else:
        body = yamlio.dump_all(result.documents).encode()
    return _Piece(len(result.documents), body, result.templates, result.notes)


_job: tuple[Policy, Catalog, str | None, Mode, Output] | None = None


def _take_job(job: tuple[Policy, Catalog, str | None, Mode, Output]) -> None:
    global _job
    _job = job


def _translate_piece(text: str) -> _Piece:
    assert _job is not None, "set by the pool's initializer"
    return _piece(text, *_job)


def _join(pieces: list[_Piece], output: Output) -> Rendered:
    """The pieces as one stream: documents renumbered, templates once, in order."""
    notes: list[Note] = []
    templates: dict[tuple[str | None, str], Obj] = {}
    offset = 0
    for piece in pieces:
        notes.extend(n._replace(document=n.document + offset) for n in piece.notes)
        offset += piece.documents
        for key, template in piece.templates.items():
            templates.setdefault(key, template)
    warnings = [str(note) for note in notes]
    bodies = [piece.body for piece in pieces if piece.body]
    if output == "json":
        body = b"".join(
            (
                b'{"documents":[',
                b",".join(bodies),
                b'],"templates":',
                orjson.dumps(list(templates.values())),
                b',"warnings":',
                orjson.dumps(warnings),
                b"}",
            )
        )
    else:
        if templates:
            bodies.append(yamlio.dump_all(templates.values()).encode())
        body = b"---\n".join(bodies)
    return Rendered(body, warnings)
