"""Imports run one way: core <- manifests <- webhook, troubleshoot <- cli.

The translation core is pure: it reaches neither the cluster nor HTTP. The webhook and the
troubleshooting commands never import each other; nothing imports the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
# What each room of app/ may import of gpu2dra's own (besides itself).
ALLOWED = {
    "core": set(),
    "manifests": {"core"},
    "webhook": {"core", "manifests", "kubeconfig"},
    "troubleshoot": {"core", "manifests", "kubeconfig"},
    "kubeconfig": set(),
    "cli": {"core", "manifests", "webhook", "troubleshoot", "kubeconfig"},
}
# Third-party packages the pure core must not import.
IO_PACKAGES = {"kubernetes", "fastapi", "starlette", "uvicorn", "prometheus_client", "urllib3"}


def _room(path: Path) -> str:
    parts = path.relative_to(APP).with_suffix("").parts
    return parts[0]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if node.module == "app":
                found.update(f"app.{alias.name}" for alias in node.names)
    return found


MODULES = sorted(p for p in APP.rglob("*.py") if p.name not in ("__init__.py", "__main__.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(APP)))
def test_imports_run_one_way(path: Path) -> None:
    room = _room(path)
    for name in _imports(path):
        if name.startswith("app."):
            target = name.split(".")[1]
            assert target == room or target in ALLOWED[room], f"{room} imports {name}"
        elif room == "core":
            assert name.split(".")[0] not in IO_PACKAGES, f"the core imports {name}"


def test_every_room_is_known() -> None:
    assert {_room(p) for p in MODULES} == set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(APP)))
def test_no_module_over_about_400_lines(path: Path) -> None:
    assert len(path.read_text().splitlines()) <= 420, "split it at a seam"
