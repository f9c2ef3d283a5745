"""Manifests in, text out: `/translate` and `gpu2dra translate`. A large stream is read,
translated and written by several processes at once."""

from __future__ import annotations

import itertools
import re
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Literal, NamedTuple

import orjson

from app.core.catalog import Catalog
from app.core.kube import Obj
from app.core.policy import Mode, Policy
from app.manifests import comments, yamlwrite
from app.manifests.documents import Note, Read, load_documents, translate_documents
from app.manifests.tally import Tally, tally

Output = Literal["yaml", "json"]
PARALLEL_BYTES = 1 << 20  # below this, workers cost more than they save: docs/performance.md
_MARKER = re.compile(r"^---(?=[ \t\r\n]|$)", re.MULTILINE)  # a document start
_DEVICE_CLASS = re.compile(r"kind[\"']?\s*:\s*[\"']?DeviceClass\b")


class Rendered(NamedTuple):
    """A translated manifest as text: each generated template once, then the documents in
    input order (YAML), or `{documents, templates, warnings}` (JSON)."""

    body: bytes
    warnings: list[str]
    tally: Tally | None = None  # documents translated, left and unchanged


class _Piece(NamedTuple):
    documents: int  # as warnings number them
    body: bytes  # the documents, rendered
    templates: dict[tuple[str | None, str], Obj]
    notes: list[Note]
    tally: Tally


def translate_text(
    text: str,
    policy: Policy,
    catalog: Catalog,
    *,
    namespace: str | None,
    mode: Mode,
    output: Output,
    jobs: int = 1,
    min_bytes: int = PARALLEL_BYTES,
    count: bool = False,
) -> Rendered:
    """Load, translate and render a manifest. A large YAML stream is cut at its document
    markers, and `jobs` processes read, translate and render the pieces. Any error (or a
    worker lost) reruns it all in this process, so that the message is the usual one."""
    # A stream whose YAML is written anew (comments.usable) is so whole, not piece by piece.
    whole = output == "yaml" and not comments.usable(text)
    pieces = _pieces(text, jobs * 2) if jobs > 1 and len(text) >= min_bytes and not whole else []
    if len(pieces) > 1:
        job = _Job(
            policy=policy,
            catalog=catalog,
            namespace=namespace,
            mode=mode,
            output=output,
            counting=count,
        )
        try:
            # fork: the workers inherit the policy and catalog instead of unpickling them
            with ProcessPoolExecutor(
                jobs, mp_context=get_context("fork"), initializer=_take_job, initargs=(job,)
            ) as pool:
                return _join(list(pool.map(_translate_piece, pieces)), output)
        except Exception:
            pass  # the rerun below reports it
    job = _Job(
        policy=policy,
        catalog=catalog,
        namespace=namespace,
        mode=mode,
        output=output,
        counting=count,
    )
    return _join([_piece(text, job)], output)


def _pieces(text: str, count: int) -> list[str]:
    """`text` cut into about `count` streams of whole documents. Directives (%YAML, %TAG)
    belong to the document after them and anchors may be used across documents, and a
    DeviceClass serves them all: such a stream (or JSON) stays whole."""
    if text.lstrip().startswith(("{", "[", "%")) or "\n%" in text or "&" in text:
        return [text]
    if _DEVICE_CLASS.search(text):
        return [text]  # a DeviceClass joins the catalog of every document
    cuts = [0]
    for i in range(1, count):
        marker = _MARKER.search(text, max(cuts[-1] + 1, len(text) * i // count))
        if marker is None:
            break
        cuts.append(marker.start())
    cuts.append(len(text))
    return [text[a:b] for a, b in itertools.pairwise(cuts) if a < b]


class _Job(NamedTuple):
    """What every piece of one stream is translated and written with."""

    policy: Policy
    catalog: Catalog
    namespace: str | None
    mode: Mode
    output: Output
    counting: bool  # documents translated, left and unchanged (--strict)


def _piece(text: str, job: _Job) -> _Piece:
    read: list[Read] = []
    docs = load_documents(text, read if job.output == "yaml" else None)
    result = translate_documents(
        docs, job.policy, job.catalog, namespace=job.namespace, mode=job.mode, offline=True
    )
    if job.output == "json":
        body = b",".join(orjson.dumps(doc) for doc in result.documents)
    else:
        body = yamlwrite.dump_all(result.documents, read).encode()
    counted = tally(docs, result.documents, result.notes, job.policy) if job.counting else Tally()
    return _Piece(result.numbered, body, result.templates, result.notes, counted)


_job: _Job | None = None


def _take_job(job: _Job) -> None:
    global _job
    _job = job


def _translate_piece(text: str) -> _Piece:
    assert _job is not None, "set by the pool's initializer"
    return _piece(text, _job)


def _join(pieces: list[_Piece], output: Output) -> Rendered:
    """The pieces as one stream: documents renumbered, templates once, in order."""
    notes: list[Note] = []
    templates: dict[tuple[str | None, str], Obj] = {}
    offset = 0
    counted = Tally()
    for piece in pieces:
        counted.add(piece.tally)
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
        if templates:  # first, so that `kubectl apply -f -` creates them before their users
            bodies.insert(0, yamlwrite.dump_all(templates.values()).encode())
        body = b"---\n".join(bodies)
    return Rendered(body, warnings, counted)


def as_kube_list(rendered: Rendered) -> bytes:
    """A JSON rendering as the Kubernetes `List` `gpu2dra translate -o json` prints: the
    templates, then the documents that use them, as items (`kubectl apply -f -` takes it and
    creates them in that order); the warnings are the caller's to say."""
    body = orjson.loads(rendered.body)
    items = [*body["templates"], *body["documents"]]
    return orjson.dumps({"apiVersion": "v1", "kind": "List", "items": items})
