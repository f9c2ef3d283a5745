"""The chart's README.md and the descriptions of values.schema.json, both from the `# --`
comments of values.yaml, the way helm-docs writes them.

A value is described by the comment above it, helm-docs style:

    # -- What it does, on as many comment lines as it takes.
    # @default -- what to show as its default, when not the value itself
    key: value

or, for a key values.yaml does not set (a policy override, a field of a map left empty), by
a comment naming its path anywhere (`*` for any key of a map, `[]` for the items of a list):

    # policy.mappings.*.deviceClassName -- The DeviceClass the claim's request asks for.

`python -m tools.chartdocs --write` rewrites README.md from README.md.gotmpl (its
`{{ template "chart.…" . }}` placeholders are helm-docs' own names) and sets the description
of every property of values.schema.json; tests/chart/test_chartdocs.py fails when either is
stale, when a value or a schema property is not described, or when a comment names no
property.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app.core.policy import DEFAULT_POLICY_YAML

Obj = dict[str, Any]
CHART = Path(__file__).resolve().parents[1] / "charts" / "gpu2dra"
VALUES_FILE = CHART / "values.yaml"
SCHEMA_FILE = CHART / "values.schema.json"
README_FILE = CHART / "README.md"
TEMPLATE_FILE = CHART / "README.md.gotmpl"
COMMAND = "python -m tools.chartdocs --write"
_EMBEDDED_POLICY: Obj = yaml.safe_load(DEFAULT_POLICY_YAML)

_KEY = re.compile(r"^(?P<indent> *)(?P<key>[A-Za-z0-9_.\-/]+):(?: |$)")
_DOC = re.compile(r"^ *# -- (?:\((?P<type>[^)]+)\) )?(?P<text>.*)$")
_PATH_DOC = re.compile(
    r"^ *# (?P<path>[A-Za-z0-9_\-]+(?:\.[A-Za-z0-9_*\-]+(?:\[\])?)*) -- (?P<text>.*)$"
)
_DEFAULT = re.compile(r"^ *# @default -- (?P<text>.*)$")
_COMMENT = re.compile(r"^ *#(?: (?P<text>.*))?$")


@dataclass
class Doc:
    """One described value: its dotted path, its description and what the table shows."""

    path: str
    text: str
    type: str = ""
    default: str = ""
    line: int = 0


class DocError(ValueError):
    """values.yaml's comments do not describe its values as this module reads them."""


def parse_docs(text: str) -> list[Doc]:
    """Every described value of values.yaml, in the order of the file."""
    docs: list[Doc] = []
    stack: list[tuple[int, str]] = []
    pending: Doc | None = None  # a `# --` comment waiting for its key
    current: Doc | None = None  # the comment that continuation lines extend
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            if pending is not None:
                raise DocError(f"values.yaml:{pending.line}: `# --` comment with no key after it")
            current = None
            continue
        if match := _DEFAULT.match(line):
            if current is None:
                raise DocError(f"values.yaml:{number}: @default outside a description")
            current.default = match["text"]
        elif match := _DOC.match(line):
            pending = current = Doc("", match["text"], match["type"] or "", line=number)
        elif match := _PATH_DOC.match(line):
            pending = None
            current = Doc(match["path"], match["text"], line=number)
            docs.append(current)
        elif match := _COMMENT.match(line):
            if current is not None:
                current.text += " " + (match["text"] or "").strip()
        elif match := _KEY.match(line):
            indent = len(match["indent"])
            while stack and stack[-1][0] >= indent:
                stack.pop()
            stack.append((indent, match["key"]))
            if pending is not None:
                pending.path = ".".join(key for _, key in stack)
                docs.append(pending)
            pending = current = None
        elif line.lstrip().startswith("- ") and ": " in line:
            raise DocError(f"values.yaml:{number}: maps in lists are not read; write them inline")
        else:
            pending = current = None
    for doc in docs:
        doc.text = doc.text.strip()
    return docs


def _lookup(tree: Any, path: str) -> tuple[bool, Any]:
    """Whether values.yaml sets `path`, and to what."""
    node = tree
    for key in path.split("."):
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _schema_node(schema: Obj, path: str) -> Obj | None:
    """The schema of the value at `path`, through properties, `*` (any key of a map), `[]`
    (the items of a list) and the branches of oneOf/anyOf."""
    node: Obj | None = schema
    for part in path.split("."):
        key, items = (part[:-2], True) if part.endswith("[]") else (part, False)
        node = _child(node, key) if node is not None else None
        if items and node is not None:
            node = node.get("items") if isinstance(node.get("items"), dict) else None
    return node


def _child(node: Obj, key: str) -> Obj | None:
    if key == "*":
        extra = node.get("additionalProperties")
        return extra if isinstance(extra, dict) else None
    if key in node.get("properties", {}):
        found: Obj = node["properties"][key]
        return found
    for branch in (*node.get("oneOf", ()), *node.get("anyOf", ())):
        if (found_in_branch := _child(branch, key)) is not None:
            return found_in_branch
    return None


def schema_paths(node: Obj, prefix: str = "") -> Iterator[str]:
    """The path of every property the schema names (outside `definitions`): the ones that
    need a description."""
    for branch in (*node.get("oneOf", ()), *node.get("anyOf", ())):
        yield from schema_paths(branch, prefix)
    for key, sub in node.get("properties", {}).items():
        path = f"{prefix}{key}"
        yield path
        yield from schema_paths(sub, path + ".")
        if isinstance(sub.get("items"), dict) and "properties" in sub["items"]:
            yield from schema_paths(sub["items"], path + "[].")
    extra = node.get("additionalProperties")
    if isinstance(extra, dict) and ("properties" in extra or "oneOf" in extra):
        yield from schema_paths(extra, prefix + "*.")


_JSON_TYPES = {
    "string": "string",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "array": "list",
    "object": "object",
}


def _type_of_value(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def _type_of_schema(node: Obj) -> str:
    if "$ref" in node:
        return "object"
    if "enum" in node:
        return " or ".join(sorted({_type_of_value(v) for v in node["enum"]}))
    if "oneOf" in node:
        return " or ".join(dict.fromkeys(_type_of_schema(b) for b in node["oneOf"]))
    types = node.get("type", "object")
    names = [types] if isinstance(types, str) else types
    return " or ".join(_JSON_TYPES[t] for t in names if t != "null")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _default(doc: Doc, values: Obj) -> str:
    if doc.default:
        return doc.default
    found, value = _lookup(values, doc.path)
    if found:
        return f"`{json.dumps(value)}`"
    if doc.path.startswith("policy.") and doc.path.count(".") == 1:
        embedded = _EMBEDDED_POLICY[doc.path.split(".", 1)[1]]
        return f"`{json.dumps(embedded)}` (embedded)"
    return ""


def values_table(docs: list[Doc], values: Obj, schema: Obj) -> str:
    """The table of every described value; a map whose keys are described on rows of their
    own shows no default."""
    rows = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    paths = [doc.path for doc in docs]
    for doc in docs:
        found, value = _lookup(values, doc.path)
        node = _schema_node(schema, doc.path) or {}
        kind = doc.type or (_type_of_value(value) if found and value is not None else "")
        kind = kind or _type_of_schema(node)
        group = any(p.startswith(doc.path + ".") for p in paths)
        default = "" if group and value != {} else _default(doc, values)
        rows.append(f"| {doc.path} | {kind} | {_cell(default)} | {_cell(doc.text)} |")
    return "\n".join(rows)


def _chart() -> Obj:
    chart: Obj = yaml.safe_load((CHART / "Chart.yaml").read_text())
    return chart


def _badge(label: str, value: str, color: str) -> str:
    escaped = value.replace("-", "--")
    return (
        f"![{label}: {value}](https://img.shields.io/badge/{label.replace(' ', '%20')}"
        f"-{escaped}-{color}?style=flat-square)"
    )


def _placeholders(docs: list[Doc], values: Obj, schema: Obj) -> dict[str, str]:
    chart = _chart()
    return {
        "chart.header": f"# {chart['name']}",
        "chart.description": str(chart["description"]),
        "chart.badgesSection": " ".join(
            [
                _badge("Version", str(chart["version"]), "informational"),
                _badge("Type", str(chart["type"]), "informational"),
                _badge("AppVersion", str(chart["appVersion"]), "informational"),
            ]
        ),
        "chart.kubeVersionLine": f"Kubernetes: `{chart['kubeVersion']}`",
        "chart.valuesHeader": "## Values",
        "chart.valuesTable": values_table(docs, values, schema),
    }


_PLACEHOLDER = re.compile(r'\{\{ template "(?P<name>[A-Za-z.]+)" \. \}\}')


def readme(template: str, docs: list[Doc], values: Obj, schema: Obj) -> str:
    """README.md.gotmpl with its placeholders filled in."""
    filled = _placeholders(docs, values, schema)

    def fill(match: re.Match[str]) -> str:
        if match["name"] not in filled:
            raise DocError(f"README.md.gotmpl: unknown placeholder {match['name']}")
        return filled[match["name"]]

    return _PLACEHOLDER.sub(fill, template)


def described(schema: Obj, docs: list[Doc]) -> Obj:
    """`schema` (a copy) with the description of every property taken from values.yaml."""
    out: Obj = json.loads(json.dumps(schema))
    for doc in docs:
        node = _schema_node(out, doc.path)
        if node is None:
            raise DocError(f"values.yaml:{doc.line}: {doc.path} is not in values.schema.json")
        node["description"] = doc.text
    return out


def problems(docs: list[Doc], values: Obj, schema: Obj) -> list[str]:
    """What is not described, described twice, or described but not in the schema."""
    found: list[str] = []
    paths = [doc.path for doc in docs]
    found += [f"{p} is described twice" for p in sorted({p for p in paths if paths.count(p) > 1})]
    found += [
        f"values.yaml:{doc.line}: {doc.path} is not in values.schema.json"
        for doc in docs
        if _schema_node(schema, doc.path) is None
    ]
    described_paths = set(paths)
    found += [
        f"{path}: no `# --` comment in values.yaml"
        for path in schema_paths(schema)
        if path not in described_paths
    ]
    found += [
        f"{path}: set in values.yaml but not described"
        for path in _leaves(values)
        if not any(path == d or path.startswith(d + ".") for d in described_paths)
    ]
    return found


def _leaves(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}{key}.")
    elif prefix:
        yield prefix[:-1]


@dataclass
class Generated:
    readme: str
    schema_text: str
    problems: list[str]


def generate() -> Generated:
    """README.md and values.schema.json as values.yaml's comments make them."""
    text = VALUES_FILE.read_text()
    docs = parse_docs(text)
    values: Obj = yaml.safe_load(text)
    schema = described(json.loads(SCHEMA_FILE.read_text()), docs)
    return Generated(
        readme(TEMPLATE_FILE.read_text(), docs, values, schema),
        json.dumps(schema, indent=2) + "\n",
        problems(docs, values, schema),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite the files")
    args = parser.parse_args()
    generated = generate()
    for problem in generated.problems:
        print(problem)
    if args.write:
        README_FILE.write_text(generated.readme)
        SCHEMA_FILE.write_text(generated.schema_text)
    else:
        stale = [
            f.name
            for f, text in ((README_FILE, generated.readme), (SCHEMA_FILE, generated.schema_text))
            if not f.exists() or f.read_text() != text
        ]
        for name in stale:
            print(f"{name} is stale: run {COMMAND}")
        if stale or generated.problems:
            raise SystemExit(1)


if __name__ == "__main__":
    main()
