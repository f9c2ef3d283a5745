"""app.manifests.yamlio against PyYAML itself: the same documents read, byte for byte the same text
written, for random documents and for YAML text full of the fragments parsers get wrong."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from app.manifests import yamlio, yamlwrite
from tests.fuzz.strategies import FUZZ, manifests
from tests.support.corpus import corpus

# Strings whose YAML spelling is easy to get wrong: implicit types of YAML 1.1, indicators,
# quotes, line breaks, characters PyYAML escapes, keys long enough to be complex keys.
TRICKY = [
    "", " ", "a", "yes", "No", "on", "~", "null", "Null", "0644", "0x1F", "1_000", "1:30",
    "1:30.5", "190:20:30", "1e3", ".5", "-1", "+1", ".inf", "2001-12-14", "<<", "=", "-", "- a",
    "a-", "a: b", "a:b",
    "a #b", "a#b", "#a", "?a", "'a'", '"a"', "a'b", "[a]", "{a}", "a,b", "*a", "&a", "!a",
    "%a", "@a", "`a", "|", ">", "a\nb", "a\n", "\n", " a", "a ", "a  b", "é", "\x85", "\u2028",
    "\ufeff", "\t", "a\tb", "---", "...", "--- a", "/data", "nvidia.com/gpu", "24.08-py3",
    "x" * 127, "x" * 128, "x" * 200, "a" * 70_000, "a " * 40_000,
]  # fmt: skip
strings = st.sampled_from(TRICKY) | st.text(max_size=12)
scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | strings
)
documents: st.SearchStrategy[Any] = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(strings, inner, max_size=4),
    max_leaves=30,
)


class Dumper(yaml.CSafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True  # gpu2dra writes shared nodes out in full


def pyyaml_dump(document: Any) -> str:
    return yaml.dump(document, Dumper=Dumper, sort_keys=False, width=1 << 16)


class CLoader(yaml.CSafeLoader):
    pass


class PyLoader(yaml.SafeLoader):
    pass


# PyYAML's types, but base-60 numbers read as the API server reads them: strings.
yamlio.read_as_the_api_server(CLoader)
yamlio.read_as_the_api_server(PyLoader)


def pyyaml_load(text: str) -> list[Any] | type[Exception]:
    """PyYAML's generic constructor, over the parser gpu2dra uses: libyaml, or where aliases
    are counted PyYAML's own, once libyaml has read the stream's syntax."""
    try:
        if "&" in text:
            collections.deque(yaml.parse(text, Loader=yaml.CSafeLoader), maxlen=0)
            return list(yaml.load_all(text, Loader=PyLoader))
        return list(yaml.load_all(text, Loader=CLoader))
    except yaml.YAMLError as err:
        return type(err)
    except yamlio.UNFIT:  # a value its tag does not fit (2024-01-51, `!!int ""`): gpu2dra
        return yaml.constructor.ConstructorError  # says so as a YAML error


def fast_load(text: str) -> list[Any] | type[Exception]:
    try:
        return list(yamlio.load_all(text))
    except (yaml.YAMLError, yamlio.TooComplex) as err:
        return type(err)


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_each_tricky_string_as_pyyaml_writes_it(value: str) -> None:
    document = {value: value, "list": [value, {value: [value]}]}
    assert yamlwrite.dump(document) == pyyaml_dump(document)
    assert fast_load(yamlwrite.dump(document)) == [document]


@FUZZ
@given(document=st.dictionaries(strings, documents, min_size=1, max_size=6) | documents)
def test_written_as_pyyaml_writes(document: Any) -> None:
    assert yamlwrite.dump(document) == pyyaml_dump(document)


@FUZZ
@given(document=st.dictionaries(strings, documents, min_size=1, max_size=6))
def test_read_as_pyyaml_reads(document: Any) -> None:
    text = pyyaml_dump(document)
    assert fast_load(text) == pyyaml_load(text) == [document]


@FUZZ
@given(body=manifests())
def test_broken_manifests_read_as_pyyaml_reads(body: bytes) -> None:
    text = body.decode("utf-8", "replace")
    assert fast_load(text) == pyyaml_load(text)


@pytest.mark.parametrize("path", corpus("translate"), ids=lambda p: p.name)
def test_corpus_reads_as_pyyaml_reads(path: Path) -> None:
    text = path.read_bytes().decode("utf-8", "replace")
    loaded = fast_load(text)
    if loaded is yamlio.TooComplex:
        assert "&" in text and "*" in text, "only alias bombs are refused"
        return
    expected = pyyaml_load(text)
    assert loaded == expected
    if isinstance(expected, list) and all(isinstance(d, dict) for d in expected):
        assert yamlwrite.dump_all(expected) == yaml.dump_all(
            expected, Dumper=Dumper, sort_keys=False, width=1 << 16
        )


def test_a_stream_of_documents() -> None:
    docs = [{"a": 1}, {"b": [{"c": None}]}, {}]
    text = yamlwrite.dump_all(docs)
    assert text == "a: 1\n---\nb:\n- c: null\n---\n{}\n"
    assert list(yamlio.load_all(text)) == docs
