"""YAML in with PyYAML's semantics (YAML 1.1, as kubectl reads it), at several times PyYAML's
speed for the JSON-shaped documents Kubernetes manifests are. One exception: base-60 numbers
(`1:30`) are strings, as the API server reads them. Writing: yamlwrite.py.

Reading keeps libyaml's parser and builds the Python objects directly instead of through
PyYAML's generic constructor. Anything unusual (merge keys, tags, long keys) takes PyYAML's
own path, so the result is always what PyYAML gives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from app.manifests import comments
from app.manifests.comments import Source

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


class DuplicateKey(yaml.constructor.ConstructorError):
    """A mapping sets `key` at line `first`, then again at line `again` (1-based)."""

    def __init__(self, key: str, first: int, again: Any) -> None:
        super().__init__(
            None, None, f"key {key!r} already set in this mapping at line {first}", again
        )
        self.key, self.first, self.again = key, first, again.line + 1


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
            raise DuplicateKey(key.value, first + 1, key.start_mark)
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


# What PyYAML's constructors of tagged scalars raise on a value their tag does not fit, as
# Python's own errors (`!!int ""`: IndexError; `!!bool x`: KeyError; `!!timestamp x`:
# AttributeError; `2024-01-51`: ValueError): a YAML error like any other.
UNFIT = (ValueError, OverflowError, IndexError, KeyError, AttributeError, TypeError)


def _unfit(err: Exception) -> str:
    if isinstance(err, (ValueError, OverflowError)):
        return str(err)
    return "a tag's constructor refused it"


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
            try:
                document = loader.construct_document(node)
            except UNFIT as err:
                # No line: the scalar that failed is not known here, only its document.
                raise yaml.constructor.ConstructorError(
                    None, None, f"a value does not fit its tag ({_unfit(err)})"
                ) from None
            yield document
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
