"""How the commands for a running cluster print, as kubectl does: tables with columns two
spaces apart under a header line (none with --no-headers), and what they write as JSON also
as YAML (-o yaml)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import orjson
import yaml

Structured = Literal["json", "yaml"]


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], *, headers: bool = True
) -> list[str]:
    """The rows as aligned lines, the header first unless `headers` is false; the columns are
    as wide with or without it, so that lines printed either way line up."""
    widths = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(header)]
    shown = [header, *rows] if headers else rows
    return [
        "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
        for cells in shown
    ]


def structured(body: bytes, output: Structured) -> bytes:
    """A JSON document as `output` asks, ending in a newline; YAML keeps its fields' order."""
    if output == "json":
        return body + b"\n"
    text = yaml.safe_dump(orjson.loads(body), sort_keys=False, allow_unicode=True, width=1 << 16)
    return text.encode()
