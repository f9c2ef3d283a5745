"""Every chart value that gpu2dra's messages (string literals in app/, the doctor's `fix:`
lines among them) and the docs tell users to set exists in values.yaml: the schema refuses a
name that does not, and the reader is left looking for a knob that is not there.

A chart value is recognised as a dotted path (`claimTemplates.extraWriters`, optionally
`=value`), in backticks or not:
- wherever its first segment is a top-level key of values.yaml, except file names
  (`policy.yaml`, `tls.crt`) and the few names below that are not this chart's values;
- whatever its first segment, where the text says it is one: after "the chart's", "chart
  value(s)" or `--set` (comma-separated assignments included)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from tools.chartdocs import SCHEMA_FILE, VALUES_FILE
from tools.gendocs import ROOT

VALUES: dict[str, Any] = yaml.safe_load(VALUES_FILE.read_text())
SCHEMA: dict[str, Any] = json.loads(SCHEMA_FILE.read_text())
# Dotted names with a top-level key's first segment that are not this chart's values.
NOT_CHART_VALUES = {
    "resources.deviceClassMappings": "Kueue's configuration",
    "resources.gpus.enabled": "a value of the NVIDIA DRA driver's chart",
    "kubeletPlugin.nodeSelector": "a value of the NVIDIA DRA driver's chart",
    "podSecurityContext.runAsNonRot": "a misspelling the schema refuses, on purpose",
    "resources.limit.cpu": "a misspelling the schema refuses, on purpose",
}
FILE_SUFFIXES = {"yaml", "yml", "json", "md", "py", "txt", "log", "tpl", "gotmpl", "crt", "key"}

_PATH = r"[A-Za-z][A-Za-z0-9]*(?:\.[A-Za-z][A-Za-z0-9]*)+"
# A whole dotted token: not the middle of a longer name, a domain (`nvidia.com/gpu`), a call.
_TOKEN = re.compile(rf"(?<![\w./-])({_PATH})(?![\w/(-]|\.\w)")
_SAID = re.compile(rf"chart(?:'s| values?)\s+`?({_PATH})(?![\w/(-]|\.\w)")
_SET = re.compile(r"--set(?:-string|-json|-file)?[ =]+['\"]?([^\s`'\"]+)")


def value_names(text: str) -> set[str]:
    """The chart values `text` names (see the module's docstring)."""
    names = {m[1] for m in _SAID.finditer(text)}
    for m in _SET.finditer(text):
        names |= {
            a.split("=", 1)[0] for a in m[1].split(",") if re.fullmatch(_PATH, a.split("=", 1)[0])
        }
    names |= {m[1] for m in _TOKEN.finditer(text) if m[1].split(".")[0] in VALUES}
    files = {n for n in names if n.rsplit(".", 1)[1] in FILE_SUFFIXES}
    return names - files - NOT_CHART_VALUES.keys()


def known(name: str) -> bool:
    """In values.yaml, or, below a map values.yaml leaves empty (`policy`) or a value of a
    Kubernetes type (`affinity`), in the schema, which refuses every other key."""
    node: Any = VALUES
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            return in_schema(SCHEMA, name.split("."))
        node = node[part]
    return True


def in_schema(node: dict[str, Any], parts: list[str]) -> bool:
    if "$ref" in node:  # "#/definitions/io.k8s.api.core.v1.Affinity"
        return in_schema(SCHEMA["definitions"][node["$ref"].rsplit("/", 1)[1]], parts)
    if not parts:
        return True
    branches = [*node.get("oneOf", ()), *node.get("anyOf", ()), *node.get("allOf", ())]
    if any(in_schema(branch, parts) for branch in branches):
        return True
    key, rest = parts[0], parts[1:]
    if key in node.get("properties", {}):
        return in_schema(node["properties"][key], rest)
    extra = node.get("additionalProperties")
    return isinstance(extra, dict) and in_schema(extra, rest)


def app_strings() -> Iterator[tuple[str, str]]:
    """Each string literal under app/ (an f-string with its fields as `{}`), where it is."""
    for path in sorted((ROOT / "app").rglob("*.py")):
        tree = ast.parse(path.read_text())
        inside = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in inside:
                    yield where, node.value
            elif isinstance(node, ast.JoinedStr):
                parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in node.values]
                yield where, "".join(str(p) for p in parts)


def doc_texts() -> Iterator[tuple[str, str]]:
    pages = [ROOT / "README.md", ROOT / "charts/gpu2dra/README.md", *(ROOT / "docs").rglob("*.md")]
    for page in sorted(pages):
        for number, line in enumerate(page.read_text().splitlines(), 1):
            yield f"{page.relative_to(ROOT)}:{number}", line
        # A phrase broken across lines ("the chart's\n`x.y`"), once more as one text.
        yield str(page.relative_to(ROOT)), page.read_text()


def unknown(texts: Iterator[tuple[str, str]]) -> list[str]:
    return sorted(
        {f"{where}: {n}" for where, text in texts for n in value_names(text) if not known(n)}
    )


def test_each_chart_value_gpu2dra_names_exists() -> None:
    assert unknown(app_strings()) == []


def test_each_chart_value_the_docs_name_exists() -> None:
    assert unknown(doc_texts()) == []


@pytest.mark.parametrize(
    ("text", "names"),
    [
        # The /validate denial of a template before it named the value right.
        (
            "ask the cluster admin to add the identity to the chart's templates.extraWriters)",
            {"templates.extraWriters"},
        ),
        ("the chart's `claimTemplates.prune.enabled=true`", {"claimTemplates.prune.enabled"}),
        ("(chart value exporter.enabled; gpu2dra_pod_gpu_info)", {"exporter.enabled"}),
        ("helm install gpu2dra --set image.tag=1.2,tls.mode=helm", {"image.tag", "tls.mode"}),
        (
            "helm upgrade gpu2dra --set-string 'claimTemplates.extraWriter={a}'",
            {"claimTemplates.extraWriter"},
        ),
        ("set `webhook.mutating.failurePolicy` to Fail.", {"webhook.mutating.failurePolicy"}),
        ("`policy.mappings.*.consumable`", {"policy.mappings"}),
        # Not this chart's values: Kubernetes fields, files, domains, code, other charts.
        ("spec.containers[0].resources.limits of a pod", set()),
        ("the webhook's `policy.yaml`, its Secret's `tls.crt`", set()),
        ("nvidia.com/gpu, service.beta.kubernetes.io/aws-load-balancer-type", set()),
        ("exporter.add_argument(...) and policy.mode_for(labels)", set()),
        ("unless you set `--set gpuResourcesEnabledOverride=true`", set()),
        ("the chart's values.schema.json, the chart's `appVersion`", set()),
    ],
)
def test_what_is_recognised_as_a_chart_value(text: str, names: set[str]) -> None:
    assert value_names(text) == names


def test_recognised_names_are_checked() -> None:
    assert not known("templates.extraWriters") and not known("claimTemplates.extraWriter")
    assert known("claimTemplates.extraWriters") and known("webhook.mutating.failurePolicy")
    assert known("policy.defaultMode") and not known("policy.defaultMod")  # from the schema
    for name in NOT_CHART_VALUES:  # an exception that is a value hides nothing
        assert not known(name), name


def test_each_exception_is_still_written_somewhere() -> None:
    texts = [text for _, text in (*app_strings(), *doc_texts())]
    for name in NOT_CHART_VALUES:
        assert any(name in text for text in texts), f"{name} is named nowhere: drop it"
