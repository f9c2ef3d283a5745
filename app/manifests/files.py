"""Where `gpu2dra translate` reads manifests from: files, directories and stdin, as `kubectl
apply -f` takes them, joined into one stream so that a template two files need is written once."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from app.manifests.documents import ManifestError

MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # all files together; more (or /dev/zero) is refused
EXTENSIONS = (".yaml", ".yml", ".json")  # those kubectl reads in a directory
_URL = re.compile(r"[a-zA-Z][a-zA-Z0-9+.-]*://")
_STARTS_WITH_MARKER = re.compile(r"---(?:[ \t\r\n]|$)").match


def read_manifests(names: list[str], *, recursive: bool, stdin: BinaryIO) -> str:
    """The manifests `names` name (files, directories, `-` for `stdin`), in order, as one
    YAML stream: a `---` between files that do not start with one. A directory gives its
    *.yaml, *.yml and *.json files by name, and with `recursive` those of the directories
    below it."""
    texts: list[str] = []
    size = 0
    for name, read in _sources(names or ["-"], recursive=recursive, stdin=stdin):
        raw = read(MAX_MANIFEST_BYTES + 1 - size)
        size += len(raw)
        if size > MAX_MANIFEST_BYTES:
            raise ManifestError(f"{name}: larger than {MAX_MANIFEST_BYTES} bytes")
        try:
            texts.append(raw.decode())
        except UnicodeDecodeError:
            raise ManifestError(f"{name}: not UTF-8 text") from None
    if len(texts) == 1:
        return texts[0]  # as read: a JSON file stays JSON
    out: list[str] = []
    for text in texts:
        if out and not out[-1].endswith("\n"):
            out.append("\n")
        if out and not _STARTS_WITH_MARKER(text):
            out.append("---\n")
        out.append(text)
    return "".join(out)


def _sources(
    names: list[str], *, recursive: bool, stdin: BinaryIO
) -> Iterator[tuple[str, Callable[[int], bytes]]]:
    for name in names:
        if name == "-":
            yield name, stdin.read
            continue
        if _URL.match(name):
            raise ManifestError(f"{name}: URLs are not read: download it first")
        path = Path(name)
        if path.is_dir():
            files = sorted(
                p
                for p in (path.rglob("*") if recursive else path.iterdir())
                if p.suffix in EXTENSIONS and p.is_file()
            )
            if not files:
                raise ManifestError(f"{name}: no *.yaml, *.yml or *.json files in the directory")
            for file in files:
                yield str(file), _Reader(file)
        else:
            yield name, _Reader(path)


class _Reader:
    """Reads at most `limit` bytes of one file when called, opening it then."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, limit: int) -> bytes:
        try:
            with open(self.path, "rb") as file:
                return file.read(limit)
        except OSError as err:
            raise ManifestError(f"{self.path}: {err.strerror}") from None
