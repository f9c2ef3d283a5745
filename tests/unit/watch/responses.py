"""A list's or a watch's response as the kubernetes client gives it with
`_preload_content=False`: what the fake APIs of the watch-cache tests answer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson


class FakeResponse:
    def __init__(self, data: bytes = b"", lines: list[Any] = ()) -> None:  # type: ignore[assignment]
        self.data = data
        self._lines = [orjson.dumps(line) + b"\n" for line in lines]

    def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
        yield from self._lines

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass
