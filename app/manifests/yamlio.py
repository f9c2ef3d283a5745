"""YAML in and out with PyYAML's semantics (YAML 1.1, as kubectl reads it), at several times
PyYAML's speed for the JSON-shaped documents Kubernetes manifests are. One exception: base-60
numbers (`1:30`) are strings, as the API server reads them.

Reading keeps libyaml's parser and builds the Python objects directly instead of through
PyYAML's generic constructor; writing emits block-style text for plain mappings, lists and
scalars and asks PyYAML only about strings it cannot tell are plain. Anything unusual (merge
keys, tags, multi-line strings, long keys, floats) takes PyYAML's own path, so the result is
always what PyYAML gives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from app.core.kube import Path
from app.manifests import comments
from app.manifests.comments import Notes, Source

MAX_ALIASES = 100  # real manifests use a few anchors; "billion laughs" bombs use thousands
# Nodes aliases may add to a stream beyond its own size: even 100 aliases, each doubling the
# one before, would stand for 2**100 nodes.
MAX_ALIAS_NODES = 100_000
# Deeper documents are refused (documents.py says which); PyYAML's pure-Python scanner, which
# streams with anchors need, is quadratic in the nesting: 1,000 brackets took seconds.
MAX_DEPTH = 64

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_WIDTH = 1 << 16

_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
# YAML 1.1's base-60 numbers, as PyYAML's int and float patterns spell them. The API server
# reads YAML with sigs.k8s.io/yaml, a fork of go-yaml v2, which never resolves them
# (strconv.ParseInt(plain, 0, 64) in its resolve.go): `1:30` is a string there. PyYAML also
# builds the number digit group by digit group in ever larger integers, so 600 KB of
# `1:0:0:…` took seconds of CPU. Read as the API server reads them.
_BASE_60 = {
    _INT: r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+",
    _FLOAT: r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
}


def _without_base_60(
    resolvers: dict[Any, list[tuple[str, re.Pattern[str]]]],
) -> dict[Any, list[tuple[str, re.Pattern[str]]]]:
    out: dict[Any, list[tuple[str, re.Pattern[str]]]] = {}
    for first, entries in resolvers.items():
        out[first] = []
        for tag, pattern in entries:
            if tag in _BASE_60:
                if _BASE_60[tag] not in pattern.pattern:  # a PyYAML that spells them otherwise
                    raise AssertionError(f"PyYAML's {tag} pattern changed")
                pattern = re.compile(pattern.pattern.replace(_BASE_60[tag], ""), pattern.flags)
            out[first].append((tag, pattern))
    return out


IMPLICIT_RESOLVERS = _without_base_60(Resolver.yaml_implicit_resolvers)

# PyYAML's implicit tags of YAML 1.1 (0644 is an int, yes a bool) for (self, kind, value,
# implicit), over the loader's own table; untyped upstream.
_resolve: Callable[[Any, Any, str, tuple[bool, bool]], str] = Resolver.resolve
_CParser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _number(base: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A constructor of `!!int` or `!!float` that refuses base-60, as go-yaml does a tag its
    value does not fit, before PyYAML would spend seconds on a long one."""

    def construct(loader: Any, node: Any) -> Any:
        if ":" in loader.construct_scalar(node):
            raise yaml.constructor.ConstructorError(
                None, None, f"a base-60 number is not a {node.tag}", node.start_mark
            )
        return base(loader, node)

    return construct


def _duplicate(node: Any) -> None:
    """Refuse a mapping that sets a key twice, as the API server's strict decoding does
    (`key "name" already set in map`): else the last would win and a document, two files
    concatenated without `---`, would silently lose its first half. A merge key (`<<`) may
    still be overridden: only keys written in the mapping itself count."""
    seen: dict[tuple[str, str], int] = {}
    for key, _ in node.value:
        if key.__class__ is not ScalarNode or key.tag == "tag:yaml.org,2002:merge":
            continue
        if (first := seen.get((key.tag, key.value))) is not None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"key {key.value!r} already set in this mapping at line {first + 1}",
                key.start_mark,
            )
        seen[key.tag, key.value] = key.start_mark.line


def _strict_mapping(loader: Any, node: Any) -> Any:
    _duplicate(node)
    return yaml.constructor.SafeConstructor.construct_yaml_map(loader, node)


def read_as_the_api_server(loader: type[Any]) -> None:
    loader.yaml_implicit_resolvers = IMPLICIT_RESOLVERS
    loader.add_constructor(_MAP, _strict_mapping)
    loader.add_constructor(_INT, _number(yaml.constructor.SafeConstructor.construct_yaml_int))
    loader.add_constructor(_FLOAT, _number(yaml.constructor.SafeConstructor.construct_yaml_float))


class TooComplex(ValueError):
    """The stream's aliases would expand beyond the limits."""


class _NotSimple(Exception):
    """This document needs PyYAML's generic path."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses alias bombs. An alias shares its node, so loading stays cheap,
    but whatever reads the documents (the walk, the JSON and YAML output) sees every alias
    expanded: the aliases are counted, the nodes they add are counted, and an alias inside
    its own anchor (a cycle) is refused."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.nodes = 0  # as written
        self.added = 0  # by aliases
        self._sizes: dict[int, int] = {}  # id(node) -> the nodes it stands for, expanded
        self._open: set[str] = set()  # anchors whose node is being composed

    def compose_document(self) -> Any:
        try:
            node = super().compose_document()  # cheap: aliases share their nodes
        finally:
            self._sizes.clear()
        if self.added > max(MAX_ALIAS_NODES, self.nodes):
            raise TooComplex(
                f"YAML aliases expand to more than {max(MAX_ALIAS_NODES, self.nodes)} nodes"
            )
        return node

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise TooComplex(f"more than {MAX_ALIASES} YAML aliases")
            anchor = self.peek_event().anchor  # type: ignore[no-untyped-call]
            if anchor in self._open:
                raise TooComplex(f"YAML alias *{anchor} is inside its own anchor")
            node = super().compose_node(parent, index)
            self.added += self._sizes[id(node)]
            return node
        anchor = getattr(self.peek_event(), "anchor", None)  # type: ignore[no-untyped-call]
        if anchor is not None:
            self._open.add(anchor)
        node = super().compose_node(parent, index)
        self._open.discard(anchor)
        size = 1
        if isinstance(node, SequenceNode):
            size += sum(self._sizes[id(item)] for item in node.value)
        elif isinstance(node, MappingNode):
            size += sum(self._sizes[id(k)] + self._sizes[id(v)] for k, v in node.value)
        self._sizes[id(node)] = size
        self.nodes += 1
        return node


read_as_the_api_server(_Loader)


class _FastLoader(_CParser):  # type: ignore[misc,valid-type]
    """libyaml's parser, for streams without anchors (so every node is a tree): implicit tags
    are resolved once per distinct plain scalar, and documents are built by one recursion
    over the nodes instead of PyYAML's generator-based constructor."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._tags: dict[str, str] = {}
        self._values: dict[tuple[str, str], Any] = {}

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode and implicit[0]:
            tag = self._tags.get(value)
            if tag is None:
                tag = self._tags[value] = _resolve(self, kind, value, implicit)
            return tag
        return _resolve(self, kind, value, implicit)

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass  # no path resolvers are registered: skip PyYAML's bookkeeping for them

    def ascend_resolver(self) -> None:
        pass

    def construct_document(self, node: Any) -> Any:
        try:
            return self._build(node)
        except _NotSimple:
            return super().construct_document(node)

    def _build(self, node: Any) -> Any:
        tag = node.tag
        if tag == _STR and node.__class__ is ScalarNode:
            return node.value
        if tag == _MAP and node.__class__ is MappingNode:
            out = {}
            for key, value in node.value:
                if key.tag != _STR or key.__class__ is not ScalarNode:
                    raise _NotSimple  # merge keys, non-string keys: PyYAML's rules
                if key.value in out:
                    _duplicate(node)  # says where
                out[key.value] = self._build(value)
            return out
        if tag == _SEQ and node.__class__ is SequenceNode:
            return [self._build(item) for item in node.value]
        if node.__class__ is ScalarNode:
            # ints, booleans, nulls, timestamps...: immutable, so built once per spelling
            cached = (tag, node.value)
            try:
                return self._values[cached]
            except KeyError:
                built = self._values[cached] = self.construct_object(node, deep=True)
                return built
        raise _NotSimple


read_as_the_api_server(_FastLoader)


def load_all(text: str, found: list[Source | None] | None = None) -> Iterable[Any]:
    """The documents of a YAML stream, one at a time, as PyYAML's SafeLoader reads them.
    Raises yaml.YAMLError, or TooComplex for alias bombs. With `found`, the Source of each
    document is appended to it once the stream is read (None where it cannot be told)."""
    # Without an anchor there can be no alias (and no bomb): every node is a tree.
    if "&" in text:
        _check_nesting(text)
        loader = _Loader(text)
    else:
        loader = _FastLoader(text)
    keep = found is not None and comments.usable(text)
    starts: list[int] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            starts.append(_start(node))
            yield loader.construct_document(node)
    finally:
        loader.dispose()
    if found is not None:
        found.extend(comments.sources(text, starts) if keep else [None] * len(starts))


def _start(node: Any) -> int:
    """The line a document's content starts on. An empty document (a comment-only one, as
    Helm renders a template that makes nothing) is an empty scalar marked where the next
    document or the stream's end starts: its own lines are those before."""
    mark = node.start_mark
    line: int = mark.line
    empty = node.__class__ is ScalarNode and node.value == "" and not node.style
    return line - 1 if empty and mark.column == 0 and line else line


def _check_nesting(text: str) -> None:
    """Refuse, at libyaml's speed, what the pure-Python scanner would take too long over:
    too deep a stream, and a syntax error (in libyaml's words, as for streams without anchors)."""
    depth = 0
    for event in yaml.parse(text, Loader=_CParser):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH + 1:  # one more than podspecs.py walks, so documents.py says which
                raise TooComplex(f"nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


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
