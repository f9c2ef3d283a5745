"""Structured logs: one JSON object a line, carrying the admission request's uid."""

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


def configure(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
