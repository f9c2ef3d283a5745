"""The chart's README.md and the schema's descriptions, generated from values.yaml's comments:
up to date, complete, and from one source."""

from __future__ import annotations

import json

import pytest
import yaml

from tools import chartdocs
from tools.chartdocs import COMMAND, Doc, DocError, generate, parse_docs


def test_readme_is_generated_from_values() -> None:
    generated = generate()
    assert chartdocs.README_FILE.read_text() == generated.readme, (
        f"README.md is stale: run {COMMAND}"
    )


def test_schema_descriptions_are_the_values_comments() -> None:
    generated = generate()
    assert chartdocs.SCHEMA_FILE.read_text() == generated.schema_text, (
        f"values.schema.json's descriptions are stale: run {COMMAND}"
    )


def test_every_value_and_schema_property_is_described() -> None:
    assert generate().problems == []


def test_every_schema_property_has_its_comment_as_description() -> None:
    schema = json.loads(chartdocs.SCHEMA_FILE.read_text())
    docs = {d.path: d.text for d in parse_docs(chartdocs.VALUES_FILE.read_text())}
    paths = list(chartdocs.schema_paths(schema))
    assert len(paths) > 100
    for path in paths:
        node = chartdocs._schema_node(schema, path)
        assert node is not None
        assert node["description"] == docs[path], path


def test_the_table_shows_each_value_once() -> None:
    readme = chartdocs.README_FILE.read_text()
    assert '| image.digest | string | `""` | Image digest' in readme
    assert "| policy | object | `{}` | Overrides of gpu2dra's embedded default policy" in readme
    assert '| policy.defaultMode | string | `"disabled"` (embedded) |' in readme
    assert "| image.tag | string | the chart's `appVersion` |" in readme
    assert "| podDisruptionBudget.maxUnavailable | int or string | `null` |" in readme
    assert "| prometheusRule.rules[].expr | string or int |  | The PromQL expression. |" in readme
    rows = [line.split(" | ")[0] for line in readme.splitlines() if line.startswith("| ")]
    keys = [row.removeprefix("| ") for row in rows]
    assert len(keys) == len(set(keys))
    for heading in ("## TLS", "### Argo CD", "## Values", "helm install gpu2dra"):
        assert heading in readme


VALUES = """\
# A plain comment, ignored.

# -- The map.
top:
  # -- A leaf, on
  # two lines.
  # @default -- computed
  leaf: ""
  # -- (int) Typed.
  number: null
# top.absent -- Not in the file.
# top.list[].field -- Of each item.
"""


def test_comments_are_read_as_helm_docs_reads_them() -> None:
    assert parse_docs(VALUES) == [
        Doc("top", "The map.", line=3),
        Doc("top.leaf", "A leaf, on two lines.", default="computed", line=5),
        Doc("top.number", "Typed.", type="int", line=9),
        Doc("top.absent", "Not in the file.", line=11),
        Doc("top.list[].field", "Of each item.", line=12),
    ]


def test_problems_name_what_is_missing_or_unknown() -> None:
    schema = {
        "type": "object",
        "properties": {
            "top": {
                "type": "object",
                "properties": {
                    "leaf": {"type": "string"},
                    "undescribed": {"type": "string"},
                    "list": {
                        "type": "array",
                        "items": {"type": "object", "properties": {"field": {}}},
                    },
                },
            }
        },
    }
    docs = parse_docs(VALUES)
    values = yaml.safe_load(VALUES + "other: 1\n")
    assert chartdocs.problems(docs, values, schema) == [
        "values.yaml:9: top.number is not in values.schema.json",
        "values.yaml:11: top.absent is not in values.schema.json",
        "top.undescribed: no `# --` comment in values.yaml",
        "top.list: no `# --` comment in values.yaml",
        "other: set in values.yaml but not described",
    ]


def test_a_comment_must_be_followed_by_its_key() -> None:
    with pytest.raises(DocError, match=r"values\.yaml:1: `# --` comment with no key after it"):
        parse_docs("# -- Lost.\n\nkey: 1\n")


def test_a_changed_comment_makes_the_readme_stale() -> None:
    text = chartdocs.VALUES_FILE.read_text()
    changed = text.replace("# -- Image pull policy.", "# -- How the image is pulled.")
    assert changed != text
    docs = parse_docs(changed)
    values = yaml.safe_load(changed)
    schema = json.loads(chartdocs.SCHEMA_FILE.read_text())
    template = chartdocs.TEMPLATE_FILE.read_text()
    assert chartdocs.readme(template, docs, values, schema) != chartdocs.README_FILE.read_text()
    assert (
        chartdocs.described(schema, docs)["properties"]["image"]["properties"]["pullPolicy"][
            "description"
        ]
        == "How the image is pulled."
    )
