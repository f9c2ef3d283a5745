"""How the commands print: tables as kubectl's, with or without the header; JSON also as YAML."""

from __future__ import annotations

import orjson
import yaml

from app.readers.output import structured, table


def test_a_table_lines_up_with_or_without_its_header() -> None:
    header = ("NAMESPACE", "NAME")
    rows = [("ml", "a-long-name"), ("team-b", "b")]
    assert table(header, rows) == ["NAMESPACE  NAME", "ml         a-long-name", "team-b     b"]
    assert table(header, rows, headers=False) == table(header, rows)[1:]
    assert table(header, []) == ["NAMESPACE  NAME"]


def test_yaml_says_what_json_says_in_its_order() -> None:
    body = orjson.dumps({"ok": False, "checks": [{"name": "a", "details": ["x: y"]}]})
    assert structured(body, "json") == body + b"\n"
    said = structured(body, "yaml").decode()
    assert yaml.safe_load(said) == orjson.loads(body)
    assert said.index("ok:") < said.index("checks:")  # not sorted
