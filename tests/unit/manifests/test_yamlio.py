"""How gpu2dra reads YAML where PyYAML's YAML 1.1 and the API server's reader differ."""

from __future__ import annotations

import time

import pytest
import yaml

from app.manifests import yamlio
from app.manifests.documents import ManifestError, load_documents

# The API server reads YAML with sigs.k8s.io/yaml, a fork of go-yaml v2 that never resolves
# YAML 1.1's base-60 numbers: each of these is a string there, as it is here.
BASE_60 = ["1:30", "190:20:30", "-1:0", "+1:00", "1:30.5", "-1:30.25", "1_0:20:30.5"]


@pytest.mark.parametrize("value", BASE_60)
def test_base_60_numbers_are_strings_as_the_api_server_reads_them(value: str) -> None:
    text = f"a: {value}\nb: [{value}]\n"
    assert list(yamlio.load_all(text)) == [{"a": value, "b": [value]}]
    # and the same through the path a stream with anchors takes
    assert list(yamlio.load_all(f"x: &x 1\n{text}")) == [{"x": 1, "a": value, "b": [value]}]


def test_other_implicit_types_read_as_before() -> None:
    text = "a: 0644\nb: 0x1F\nc: 1_000\nd: yes\ne: 1.5\nf: ~\ng: '1:30'\nh: 12\n"
    assert list(yamlio.load_all(text)) == [
        {"a": 420, "b": 31, "c": 1000, "d": True, "e": 1.5, "f": None, "g": "1:30", "h": 12}
    ]


@pytest.mark.parametrize("tag", ["!!int", "!!float"])
def test_a_base_60_number_tagged_as_one_is_refused(tag: str) -> None:
    with pytest.raises(yaml.YAMLError, match="base-60"):
        list(yamlio.load_all(f"a: {tag} 1:30\n"))


def test_a_long_base_60_number_reads_in_linear_time() -> None:
    # PyYAML made a number of it digit group by digit group: 600 KB took seconds of CPU.
    body = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: 1" + ":0" * 300_000 + "}\n"
    )
    start = time.process_time()
    docs = load_documents(body)
    assert time.process_time() - start < 0.5
    assert docs[0]["data"]["a"].startswith("1:0:0")


def test_a_tagged_long_base_60_number_is_refused_at_once() -> None:
    body = "a: !!int 1" + ":0" * 300_000 + "\n"
    start = time.process_time()
    with pytest.raises(ManifestError, match="base-60"):
        load_documents(body)
    assert time.process_time() - start < 0.5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # two files concatenated without `---`: the first document would vanish
        (
            "kind: ConfigMap\nmetadata:\n  name: a\nkind: ConfigMap\nmetadata:\n  name: b\n",
            "document 1: not valid YAML at line 4: key 'kind' already set in this mapping "
            "at line 1",
        ),
        (  # with an anchor elsewhere: PyYAML's own constructor
            "kind: Pod\n---\nmetadata: &m {name: a, name: b}\nx: *m\n",
            "document 2: not valid YAML at line 3: key 'name' already set in this mapping "
            "at line 3",
        ),
        (  # a key of another type is another key; a duplicate among them is not
            "a: 1\n'1': x\n1: y\n1: z\n",
            "document 1: not valid YAML at line 4: key '1' already set in this mapping at line 3",
        ),
    ],
)
def test_a_key_set_twice_is_refused_with_its_lines(text: str, message: str) -> None:
    with pytest.raises(ManifestError) as err:
        load_documents(text)
    assert str(err.value) == message


def test_a_merge_key_may_still_be_overridden() -> None:
    [doc] = load_documents("kind: X\nbase: &b {k: 1, j: 2}\nuse: {<<: *b, k: 3}\n")
    assert doc["use"] == {"k": 3, "j": 2}


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("!!int ", "a tag's constructor refused it"),
        ("!!float ", "a tag's constructor refused it"),
        ("!!bool x", "a tag's constructor refused it"),
        ("!!timestamp x", "a tag's constructor refused it"),
        ("&a !!int ", "a tag's constructor refused it"),  # through PyYAML's own loader
        ("2024-01-51", "day is out of range for month"),
    ],
)
def test_a_value_its_tag_does_not_fit_is_a_yaml_error(value: str, why: str) -> None:
    """PyYAML's constructors raise Python's own errors on these (IndexError, KeyError,
    AttributeError, ValueError): read, they are one ManifestError that names the document."""
    with pytest.raises(ManifestError) as raised:
        load_documents(f"kind: ConfigMap\ndata:\n  a: {value}\n")
    assert str(raised.value) == (
        f"document 1: not valid YAML: a value does not fit its tag ({why})"
    )
