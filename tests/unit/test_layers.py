"""Imports run one way: core <- manifests <- webhook; core <- watch <- webhook, exporter;
core <- readers <- diagnose, plan, maintain; all of them <- cli.

The translation core is pure: it reaches neither the cluster nor HTTP; so is the exporter's
join (exporter/gpuinfo.py). The webhook, the exporter and the commands for a running cluster
(diagnose, plan, maintain, and the readers they share) never import each other; what a
serving process watches the cluster with is in watch; the read-only rooms never import
maintain, which writes, nor one another; nothing imports the CLI.

In tests/, no module imports a test module or a conftest: what several suites share is in
tests/support, what one suite shares among its modules is a helper module beside them. The
unit tests mirror app/: a folder of tests/unit per folder of app/.
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
    "webhook": {"core", "manifests", "watch", "kubeconfig"},
    "exporter": {"core", "watch"},  # gpu2dra exporter, its own Deployment
    "watch": {"core", "kubeconfig"},  # what a serving process watches the cluster with
    "readers": {"core", "kubeconfig"},  # what the commands share: reading a cluster, printing
    "diagnose": {"core", "manifests", "readers", "kubeconfig"},  # doctor, explain, report
    "plan": {"core", "manifests", "readers", "kubeconfig"},  # impact, quota, deviceclasses
    "maintain": {"core", "readers", "kubeconfig"},  # prune-templates: the one that writes
    "kubeconfig": set(),
}
ALLOWED["cli"] = set(ALLOWED)  # nothing imports the CLI; it imports every other room
# Third-party packages the pure core must not import, nor the pure modules of other rooms.
IO_PACKAGES = {"kubernetes", "fastapi", "starlette", "uvicorn", "prometheus_client", "urllib3"}
PURE = {APP / "exporter" / "gpuinfo.py"}


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
        elif room == "core" or path in PURE:
            assert name.split(".")[0] not in IO_PACKAGES, f"the pure {path.name} imports {name}"


def test_every_room_is_known() -> None:
    assert {_room(p) for p in MODULES} == set(ALLOWED)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(APP)))
def test_no_module_sprawls(path: Path) -> None:
    """Modules are named by the concept they hold, not kept under a line count; this only
    catches sprawl."""
    assert len(path.read_text().splitlines()) <= 600, "a module holds one concept: split at a seam"


# ---- tests/ ------------------------------------------------------------------------------

TESTS = APP.parent / "tests"
TEST_MODULES = sorted(TESTS.rglob("*.py"))


def _test_imports(path: Path) -> set[str]:
    """The tests.* modules (and names, which may be modules) `path` imports, relative imports
    made absolute."""
    package = path.relative_to(TESTS.parent).with_suffix("").parts[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else ()
            module = ".".join((*base, *(node.module or "").split("."))).strip(".")
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.split(".")[0] == "tests"}


def _file_of(module: str) -> Path | None:
    path = TESTS.parent.joinpath(*module.split("."))
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def test_unit_tests_mirror_the_app() -> None:
    """tests/unit/core holds the tests of app/core, and so on; each folder is a package, so its
    modules import as tests.unit.<room>.<module> and two of one name do not clash."""
    unit = TESTS / "unit"
    found = (p.relative_to(unit) for p in unit.rglob("*") if p.is_dir())
    folders = sorted(f for f in found if not any(part.startswith((".", "__")) for part in f.parts))
    assert folders, "no folder under tests/unit"
    assert [f for f in folders if not (APP / f).is_dir()] == [], "not a folder of app/"
    assert [f for f in folders if not (unit / f / "__init__.py").is_file()] == [], "no __init__.py"


def _holds_tests(package: Path) -> bool:
    return any(package.glob("test_*.py"))


@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_module_imports_another(path: Path) -> None:
    """pytest collects a test module once; imported, its tests and fixtures come along too."""
    for name in _test_imports(path):
        target = _file_of(name)
        if target is not None:
            assert not target.name.startswith("test_"), f"imports test module {name}"
            assert target.name != "conftest.py", f"imports conftest {name}"


@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: str(p.relative_to(TESTS)))
def test_suites_share_through_tests_support(path: Path) -> None:
    """A suite imports its own helpers, and of the others only packages that hold no tests
    (tests/support; tests/node, the real node's harness)."""
    suite = path.relative_to(TESTS).parts[0]
    for name in _test_imports(path):
        parts = name.split(".")
        if len(parts) < 2 or parts[1] == suite or _file_of(name) is None:
            continue
        assert not _holds_tests(TESTS / parts[1]), f"imports {name} of another suite"


# ---- tools/ ------------------------------------------------------------------------------

TOOLS = APP.parent / "tools"


@pytest.mark.parametrize("path", sorted(TOOLS.rglob("*.py")), ids=lambda p: p.name)
def test_tools_import_no_tests(path: Path) -> None:
    """The generators run without the test suite; the tests import them, never the reverse."""
    assert not any(name.split(".")[0] == "tests" for name in _imports(path))
