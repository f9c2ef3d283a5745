"""Structured logs: one JSON object a line, carrying the admission request's uid; or text, the
same fields as key=value after the message."""

from __future__ import annotations

import datetime as dt
import logging
from contextvars import ContextVar
from typing import Any, NamedTuple

import orjson

# Fields a caller may attach with `extra=`; nothing else (no objects, no specs) is logged.
FIELDS = (
    "uid",
    "namespace",
    "kind",
    "operation",
    "result",
    "codes",  # the outcome codes of an answer's warnings (docs/reference/outcomes.md)
    "ms",
    "endpoint",
    "template",
    "user",
)


class Asker(NamedTuple):
    """The admission request a write of gpu2dra's is made for: its uid, and the caller as the
    API server names it (userInfo.username), which the body alone cannot prove."""

    uid: str
    user: str | None


# Set by /mutate around the template creates a pod needs; a create's log line reads it. The
# create runs on a worker thread, which asyncio starts with a copy of this context.
ASKER: ContextVar[Asker | None] = ContextVar("asker", default=None)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for name in FIELDS:
            if (value := record.__dict__.get(name)) is not None:
                entry[name] = value
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return orjson.dumps(entry).decode()


class TextFormatter(logging.Formatter):
    """`time level logger message key=value ...` (logfmt's pairs): the fields the JSON lines
    carry, in the same order; a value with a space, `"` or `=` is quoted, a list is joined with
    commas."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        head, newline, rest = line.partition("\n")  # a traceback stays below the fields
        pairs = [
            f"{name}={_text(value)}"
            for name in FIELDS
            if (value := record.__dict__.get(name)) is not None
        ]
        return " ".join([head, *pairs]) + newline + rest


def _text(value: Any) -> str:
    if isinstance(value, list | tuple):
        value = ",".join(str(v) for v in value)
    said = str(value)  # empty: `codes=`, as logfmt writes it
    if any(c.isspace() or c in '"=' for c in said):
        return orjson.dumps(said).decode()
    return said


def configure(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
