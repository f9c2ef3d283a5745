"""The documentation: generated references that match the code, links that lead somewhere, a
README short enough to read, and tables that name what the code has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from kubernetes.client import ApiClient

from app.core.mapping import PolicyError
from app.core.policy import parse_policy
from app.diagnose.doctor.checks import run_checks
from app.diagnose.doctor.facts import Facts
from app.exporter.server import Exporter
from app.readers.client import ReadError
from app.webhook.endpoint import RESULTS
from app.webhook.metrics import Metrics
from tools import gendocs

ROOT = gendocs.ROOT
PAGES = sorted(
    [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "docs").rglob("*.md")],
)
# Files the docs link to that come with the chart's own generated reference.
PENDING = {ROOT / "charts" / "gpu2dra" / "README.md"}
README_LINES = 200

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(page: Path) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", page.read_text()))
    return _LINK.findall(text)


@pytest.mark.parametrize("path", sorted(gendocs.GENERATED))
def test_generated_reference_is_current(path: str) -> None:
    file = ROOT / path
    assert file.exists(), f"{path} is missing: run {gendocs.REGENERATE}"
    assert file.read_text() == gendocs.GENERATED[path](), (
        f"{path} is stale: run {gendocs.REGENERATE}"
    )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, mailto:, or an anchor of the page itself
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() and path not in PENDING:
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"


_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
_ID = re.compile(r'<a\s+(?:id|name)="([^"]+)"')
_INLINE_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text lower-cased, punctuation but `-` and `_`
    dropped, each space a `-`."""
    text = _INLINE_LINK.sub(r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    """The anchors a page has: its headings' (a repeated one numbered `-1`, `-2`, as GitHub
    does) and its explicit `<a id="...">`."""
    text = _FENCE.sub("", page.read_text())
    found: set[str] = set(_ID.findall(text))
    seen: dict[str, int] = {}
    for heading in _HEADING.findall(text):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(f"{slug}-{count}" if count else slug)
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_anchors_point_at_headings_or_ids(page: Path) -> None:
    """A link to `page.md#anchor` (or `#anchor` on the page itself) names a heading or an
    `<a id>` there: a rule of translation.md is linked by its id, never by its number."""
    broken = []
    for target in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target) or "#" not in target:
            continue
        path, anchor = target.split("#", 1)
        file = (page.parent / path).resolve() if path else page
        if file.suffix == ".md" and file.exists() and anchor not in _anchors(file):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to missing anchors: {broken}"


def test_the_anchor_checker_knows_headings_and_ids() -> None:
    anchors = _anchors(ROOT / "docs" / "concepts" / "translation.md")
    assert {"fail-closed", "namespace-modes", "rule-quota", "rule-f2-node-terms"} <= anchors
    assert _slug("Before a namespace is enabled: `gpu2dra impact`") == (
        "before-a-namespace-is-enabled-gpu2dra-impact"
    )
    assert _slug("[`gpu2dra exporter`](x.md): which pod") == "gpu2dra-exporter-which-pod"


def test_the_link_checker_sees_links() -> None:
    assert "docs/README.md" in _links(ROOT / "README.md")


def test_readme_is_short() -> None:
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_LINES, f"README.md has {lines} lines: move detail into docs/"


def test_the_docs_index_lists_every_page() -> None:
    index = ROOT / "docs" / "README.md"
    listed = {(index.parent / t.split("#")[0]).resolve() for t in _links(index)}
    pages = {p for p in (ROOT / "docs").rglob("*.md") if p != index}
    runs = ROOT / "docs" / "performance" / "runs"
    missing = [str(p.relative_to(ROOT)) for p in pages if p not in listed and runs not in p.parents]
    assert not missing, f"docs/README.md does not link to {missing}"


def test_every_doctor_check_is_in_the_table() -> None:
    err = ReadError("forbidden")
    facts = Facts(
        version=err,
        resource_versions=err,
        device_classes=err,
        slices=err,
        nodes=err,
        namespaces=err,
        registrations=err,
        quotas=err,
        kueue=err,
    )
    policy = parse_policy({})
    names = [c.name for c in run_checks(facts, policy)]
    text = (ROOT / "docs" / "troubleshooting" / "doctor.md").read_text()
    rows = re.findall(r"^\| `([a-z-]+)` \|", text, re.M)
    assert rows == names


def test_every_metric_is_documented() -> None:
    metrics = Metrics()
    metrics.tally("mutate", RESULTS)
    text = (ROOT / "docs" / "reference" / "metrics.md").read_text()
    names = {m.name for m in metrics.registry.collect()}
    assert names, "no metric collected"
    exporter = Exporter(ApiClient())
    names |= {m.name for m in exporter.metrics.registry.collect()}
    names |= {m.name for m in exporter.info_registry.collect()}
    missing = sorted(n for n in names if n not in text)
    assert not missing, f"docs/reference/metrics.md does not name {missing}"
    for result in RESULTS:
        assert f"`{result}`" in text, f"docs/reference/metrics.md does not name result {result}"


@pytest.mark.parametrize("field", sorted(gendocs.MAPPING_FIELDS))
def test_each_documented_mapping_field_is_accepted(field: str) -> None:
    mapping = {"deviceClassName": "gpu.nvidia.com", field: gendocs.MAPPING_EXAMPLES[field]}
    parse_policy({"mappings": {"nvidia.com/gpu": mapping}})


def test_an_undocumented_mapping_field_is_refused() -> None:
    with pytest.raises(PolicyError, match="unknown field"):
        parse_policy({"mappings": {"nvidia.com/gpu": {"deviceClassName": "x", "other": 1}}})


def test_the_docs_command_says_what_is_stale(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(gendocs, "stale", lambda: ["docs/reference/cli.md"])
    assert gendocs.main([]) == 1
    assert capsys.readouterr().err == (
        f"docs/reference/cli.md is stale: run {gendocs.REGENERATE}\n"
    )
