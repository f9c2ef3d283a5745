"""YAML out with PyYAML's semantics, at several times its speed for the JSON-shaped documents
Kubernetes manifests are: block-style text for plain mappings, lists and scalars, asking
PyYAML only about strings it cannot tell are plain. Anything unusual (multi-line strings,
long keys, floats) takes PyYAML's own path, so the result is always what PyYAML writes.
Reading: yamlio.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import yaml
from yaml.nodes import ScalarNode
from yaml.resolver import Resolver

from app.core.kube import Path
from app.manifests.comments import Notes, Source

_STR = "tag:yaml.org,2002:str"
_WIDTH = 1 << 16
_CDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
# PyYAML's implicit tags of YAML 1.1 (0644 is an int, yes a bool) for (self, kind, value,
# implicit); untyped upstream.
_resolve: Callable[[Any, Any, str, tuple[bool, bool]], str] = Resolver.resolve


class _NotSimple(Exception):
    """This document needs PyYAML's own writer."""


class _Dumper(_CDumper):  # type: ignore[misc,valid-type]
    def ignore_aliases(self, data: Any) -> bool:
        return True


def _pyyaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=_WIDTH)


# Strings certainly plain in PyYAML's eyes once they resolve to str: no indicator at the
# start, no ': ', ' #', space, quote or flow character anywhere, nothing outside ASCII.
_PLAIN = re.compile(r"[A-Za-z0-9_/][A-Za-z0-9_./=+-]*").fullmatch
_IMPLICIT_FIRST = frozenset(k for k in Resolver.yaml_implicit_resolvers if k)
_RESOLVER = Resolver()


@lru_cache(maxsize=4096)
def _quoted(value: str, key: bool) -> str:
    """PyYAML's spelling of a string it does not write plain, as a key or a value."""
    text = _pyyaml({value: None} if key else [value])
    scalar = text[: -len(": null\n")] if key else text[2:-1]
    if "\n" in scalar or scalar.startswith("? "):
        raise _NotSimple  # multi-line or a complex key: depends on the indentation
    return scalar


# The emitter below (_string, _scalar, _mapping, _sequence) takes positional arguments, unlike
# the rest: it is called for every key and node written, where keyword arguments would cost
# half as much again per call.
def _string(value: str, key: bool) -> str:
    if _PLAIN(value) and (value[0] not in _IMPLICIT_FIRST or _resolves_to_str(value)):
        if key and len(value) >= 128:
            raise _NotSimple  # PyYAML writes long keys as complex keys
        return value
    return _quoted(value, key)


@lru_cache(maxsize=4096)
def _resolves_to_str(value: str) -> bool:
    return _resolve(_RESOLVER, ScalarNode, value, (True, False)) == _STR


def _scalar(value: Any) -> str:
    if value.__class__ is str:
        return _string(value, False)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if value.__class__ is int:
        return str(value)
    if value == {} and value.__class__ is dict:
        return "{}"
    if value == [] and value.__class__ is list:
        return "[]"
    raise _NotSimple  # floats, dates, binary: PyYAML's representers


def _mapping(
    node: dict[Any, Any],
    indent: str,
    out: list[str],
    inline: bool,
    notes: Notes | None = None,
    path: Path = (),
) -> None:
    for key, value in node.items():
        if key.__class__ is not str:
            raise _NotSimple
        here = (*path, key) if notes is not None else path
        if inline:
            inline = False  # the first key goes on the line of its "- "
        else:
            if notes is not None:
                _before(notes, here, indent, out)
            out.append(indent)
        out.append(_string(key, True))
        if value and value.__class__ is dict:
            out.append(":")
            _after(notes, here, out)
            _mapping(value, indent + "  ", out, False, notes, here)
        elif value and value.__class__ is list:
            out.append(":")
            _after(notes, here, out)
            # PyYAML does not indent lists in mappings; the input may have
            inner = indent + "  " if notes is not None and notes.indented_lists else indent
            _sequence(value, inner, out, False, notes, here)
        elif notes is not None and (block := _literal(value, indent + "  ")) is not None:
            out.append(": ")
            out.append(block[0])
            _after(notes, here, out)
            out.append(block[1])
        else:
            out.append(": ")
            out.append(_scalar(value))
            _after(notes, here, out)


def _sequence(
    node: list[Any],
    indent: str,
    out: list[str],
    inline: bool,
    notes: Notes | None = None,
    path: Path = (),
) -> None:
    for i, item in enumerate(node):
        here = (*path, i) if notes is not None else path
        if inline:
            inline = False
        else:
            if notes is not None:
                _before(notes, here, indent, out)
            out.append(indent)
        out.append("- ")
        if item and item.__class__ is dict:
            _mapping(item, indent + "  ", out, True, notes, here)
        elif item and item.__class__ is list:
            _sequence(item, indent + "  ", out, True, notes, here)
        elif notes is not None and (block := _literal(item, indent + "  ")) is not None:
            out.append(block[0])
            _after(notes, here, out)
            out.append(block[1])
        else:
            out.append(_scalar(item))
            _after(notes, here, out)


# What a literal block scalar holds as written: printable text, tabs and line breaks.
_LITERAL = re.compile(r"[\t\n\x20-\x7e\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]*").fullmatch


def _literal(value: Any, indent: str) -> tuple[str, str] | None:
    """A multi-line string as a literal block (`|`, `|-`, `|+`): its indicator and its lines,
    as the input most likely wrote it; None for a string a block cannot hold as it is."""
    if value.__class__ is not str or "\n" not in value or not _LITERAL(value):
        return None
    lines = value.split("\n")
    if lines[0][:1] in (" ", "\t") or any(line and not line.strip() for line in lines):
        return None  # leading or whitespace-only lines would change the indentation read
    if value.endswith("\n\n"):
        indicator, lines = "|+", lines[:-1]
    elif value.endswith("\n"):
        indicator, lines = "|", lines[:-1]
    else:
        indicator = "|-"
    return indicator, "".join(f"{indent}{line}\n" if line else "\n" for line in lines)


def _before(notes: Notes, path: Path, indent: str, out: list[str]) -> None:
    for line in notes.before.get(path, ()):
        out.append(f"{indent}{line}\n" if line else "\n")


def _after(notes: Notes | None, path: Path, out: list[str]) -> None:
    if notes is not None and (comment := notes.after.get(path)):
        out.append(comment)
    out.append("\n")


def dump(document: Any, source: Source | None = None) -> str:
    """One document as PyYAML writes it (block style, keys in order, no aliases); with the
    `source` it was read from, its comments and list indentation kept (comments.py)."""
    notes = source.notes() if source is not None else None
    head = "".join(line + "\n" for line in notes.head) if notes is not None else ""
    tail = "".join(line + "\n" for line in notes.tail) if notes is not None else ""
    if document and document.__class__ is dict:
        out: list[str] = [head]
        try:
            _mapping(document, "", out, inline=False, notes=notes)
            out.append(tail)
            return "".join(out)
        except _NotSimple:
            pass
    return head + _pyyaml(document) + tail


def dump_all(
    documents: Iterable[Any],
    read: Iterable[tuple[Any, Source | None]] | None = None,
) -> str:
    """A YAML stream of `documents`, separated by `---`. With `read`, the (document, Source)
    each came from, in order: a document that is the one read is written as it was read."""
    if read is None:
        return "---\n".join(dump(document) for document in documents)
    out = []
    for document, (original, source) in zip(documents, read, strict=True):
        if source is not None and document is original and source.text:
            out.append(source.text)
        else:
            out.append(dump(document, source))
    return "---\n".join(out)
