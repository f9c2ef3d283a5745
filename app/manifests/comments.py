"""The input's own text, kept in the YAML output so that a GitOps diff shows only what changed.

A document the translation leaves as it was is written back as it was read: its lines, its
comments, its quoting and indentation. A document it changes is written anew, and its comments
go with the nodes they were written beside: a full-line comment (or a blank line) before the
node that follows it, a comment at the end of a line after the node that starts on that line,
and the comments before and after the document's content around it. A comment beside a node
the translation removed (an `nvidia.com/gpu` limit) goes with it.

The nodes are read from the parser's marks (line and column), so a `#` inside a scalar is
never taken for a comment. A stream the marks cannot be trusted for (directives, line breaks
other than `\\n` and `\\r\\n`, a document that starts without a `---` after another) keeps
only what PyYAML's writer gives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from app.core.kube import Path

Span = tuple[int, int, int, int]  # first line, its column; last line, the column after
_CParser = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MARKER = re.compile(r"---(?:[ \t]|$)").match  # a document start, at the start of a line


@dataclass(frozen=True)
class Notes:
    """The comments of one document, by the nodes they were written beside."""

    head: tuple[str, ...] = ()  # comment and blank lines before its content, as written
    tail: tuple[str, ...] = ()  # and after it
    before: Mapping[Path, tuple[str, ...]] = field(default_factory=dict)  # "" is a blank line
    after: Mapping[Path, str] = field(default_factory=dict)  # "  # ..." ending its line
    indented_lists: bool = False  # `key:\n  - item` rather than PyYAML's `key:\n- item`


@dataclass
class Source:
    """What a document looked like in the input. Its notes are read again from its own text
    when it is written anew: most documents of a large stream are not, and cost nothing."""

    text: str  # its lines as written, the `---` before it dropped; "" when they cannot be reused
    body: str  # its lines to read the notes from
    _notes: Notes | None = field(default=None, repr=False)

    def notes(self) -> Notes:
        if self._notes is None:
            try:
                root = yaml.compose(self.body, Loader=_CParser)
            except (yaml.YAMLError, RecursionError, ValueError):
                root = None
            lines = self.body.split("\n")
            self._notes = Notes() if root is None else _notes(lines, shape(root))
        return self._notes


class Shape(NamedTuple):
    """What one document's nodes say about its lines (0-based, as the parser counts them)."""

    start: int  # the line its content starts on
    last: int  # the last line holding content
    starts: dict[int, list[Path]]  # line -> the paths of the nodes that start on it, outer first
    spans: dict[int, list[Span]]  # line -> the scalars on it that hold a `#`
    within: set[int]  # lines inside a multi-line scalar, after its first
    indented: int  # block lists under a key, indented below it, less those that are not


def shape(root: Any) -> Shape:
    """The shape of the document `root`, a composed node."""
    starts: dict[int, list[Path]] = {}
    spans: dict[int, list[Span]] = {}
    within: set[int] = set()
    last = root.start_mark.line
    indented = 0
    stack: list[tuple[Any, Path]] = [(root, ())]
    seen = 0
    while stack and seen < 1_000_000:  # aliases let a node be reached many times
        node, path = stack.pop()
        seen += 1
        start, end = node.start_mark, node.end_mark
        if isinstance(node, ScalarNode):
            end_line = end.line - 1 if end.column == 0 and end.line > start.line else end.line
            last = max(last, end_line)
            if end_line > start.line:
                within.update(range(start.line + 1, end_line + 1))
            if "#" in node.value:
                span = (start.line, start.column, end.line, end.column)
                for line in range(start.line, end.line + 1):
                    spans.setdefault(line, []).append(span)
            continue
        if node.flow_style:
            last = max(last, end.line)
        if isinstance(node, MappingNode):
            items: list[tuple[Any, Path]] = []
            for key, value in node.value:
                here = path
                if isinstance(key, ScalarNode):
                    here = (*path, key.value)
                    starts.setdefault(key.start_mark.line, []).append(here)
                    if isinstance(value, SequenceNode) and not value.flow_style and value.value:
                        first = value.value[0].start_mark
                        indented += 1 if first.column - 2 > key.start_mark.column else -1
                else:
                    items.append((key, here))
                items.append((value, here))
            stack.extend(reversed(items))
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                starts.setdefault(item.start_mark.line, []).append((*path, i))
            stack.extend((v, (*path, i)) for i, v in reversed(list(enumerate(node.value))))
    return Shape(
        start=root.start_mark.line,
        last=last,
        starts=starts,
        spans=spans,
        within=within,
        indented=indented,
    )


def usable(text: str) -> bool:
    """Whether the parser's line numbers are the lines of `text` split at `\\n`, and its
    text can be written back as read: libyaml takes a tab inside a plain scalar that PyYAML's
    own scanner refuses, so a stream with tabs is written anew."""
    if "\t" in text:
        return False
    if "\r" in text.replace("\r\n", "") or any(c in text for c in "\x85\u2028\u2029"):
        return False
    return not any(line.startswith("%") for line in text.split("\n"))


def sources(text: str, starts: list[int]) -> list[Source | None]:
    """The Source of each document of `text`, given the lines their content starts on; all
    None when the documents cannot be told apart by their `---` lines."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    markers: list[int | None] = []
    for i, start in enumerate(starts):
        # The last `---` before the content: one inside the document before cannot follow it.
        low = starts[i - 1] + 1 if i else 0
        top = min(start, len(lines) - 1)
        found = next((n for n in range(top, low - 1, -1) if _MARKER(lines[n])), None)
        if i and found is None:
            return [None] * len(starts)  # a document after `...` without `---`
        markers.append(found)
    out: list[Source | None] = []
    for i, start in enumerate(starts):
        marker = markers[i]
        end = markers[i + 1] if i + 1 < len(starts) else len(lines)
        assert end is not None
        begin = 0 if marker is None or not i else marker
        own = [line for n, line in enumerate(lines[begin:end], begin) if n != marker]
        if marker == start:  # `--- {a: 1}`: the content starts on the marker's line
            out.append(Source("", "\n".join(lines[begin:end])))
            continue
        text = "".join(line + "\n" for line in own)
        out.append(Source(text, text))
    return out


def _notes(lines: list[str], s: Shape) -> Notes:
    head = tuple(lines[: s.start])
    tail = lines[s.last + 1 :]
    while tail and not tail[-1]:
        tail.pop()
    before: dict[Path, list[str]] = {}
    after: dict[Path, str] = {}
    pending: list[str] = []
    for n in range(s.start, min(s.last + 1, len(lines))):
        line = lines[n].rstrip("\r")
        if n in s.within:
            continue  # a line of a multi-line scalar
        at = _comment(line, n, s.spans) if "#" in line else None
        paths = s.starts.get(n)
        if at is None and line.strip():
            if pending and paths:
                before.setdefault(paths[0], []).extend(pending)
                pending = []
            continue
        if at is None or not line[:at].strip():  # a blank line, or a comment on its own
            pending.append(line[at:] if at is not None else "")
            continue
        if not paths:
            pending.append(line[at:])  # beside a flow collection's later line: kept above
            continue
        if pending:
            before.setdefault(paths[0], []).extend(pending)
            pending = []
        # after the line's first key (a flow mapping's keys all start on it), or its item
        where = next((p for p in paths if p and isinstance(p[-1], str)), paths[-1])
        after[where] = line[len(line[:at].rstrip()) :]  # with the space before it
    return Notes(
        head=head,
        tail=(*pending, *tail),
        before={path: tuple(found) for path, found in before.items() if found},
        after=after,
        indented_lists=s.indented > 0,
    )


def _comment(line: str, n: int, spans: dict[int, list[Span]]) -> int | None:
    at = line.find("#")
    while at != -1:
        if (at == 0 or line[at - 1] in " \t") and not _inside(spans, n, at):
            return at
        at = line.find("#", at + 1)
    return None


def _inside(spans: dict[int, list[Span]], line: int, column: int) -> bool:
    return any((l0, c0) <= (line, column) < (l1, c1) for l0, c0, l1, c1 in spans.get(line, ()))
