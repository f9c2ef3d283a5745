"""Malformed manifests on POST /translate and `gpu2dra translate`: the corpus, hypothesis,
YAML bombs and oversized input, rejected within bounded time and memory."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from app.cli import MAX_MANIFEST_BYTES, main
from app.core.catalog import Catalog
from app.core.policy import load_policy
from app.manifests.documents import ManifestError
from app.manifests.render import translate_text
from app.webhook.application import create_app
from app.webhook.settings import Settings
from tests.fuzz.answers import check_translate_answer
from tests.fuzz.strategies import FUZZ, manifests
from tests.support.corpus import CORPUS_POLICY, corpus, outcome_of
from tests.support.fake import FakeCluster
from tests.support.strategies import pod_specs
from tests.support.validation import pod_errors, schema_errors

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
MiB = 1024 * 1024


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    app = create_app(Settings(policy=load_policy(CORPUS_POLICY)), FakeCluster())
    with TestClient(app) as client:
        yield client


_VALID_TEMPLATES: set[str] = set()


def check_result(result: Any) -> None:
    """Every template /translate prints is valid on each tested release (each name checked once)."""
    if not isinstance(result, dict):
        return
    for template in result["templates"]:
        name = template["metadata"]["name"]
        if name not in _VALID_TEMPLATES:
            assert (
                schema_errors({**template, "metadata": {"name": name, "namespace": "ml"}}) == set()
            )
            _VALID_TEMPLATES.add(name)


def translate(client: TestClient, body: bytes, accept: str = "", **params: str) -> Any:
    response = client.post("/translate", content=body, params=params, headers={"accept": accept})
    result = check_translate_answer(response.status_code, response.content, "yaml" in accept)
    check_result(result)
    return response.status_code, result


def outcome(status: int, result: Any) -> str:
    if status != 200:
        return str(status)
    return "warned" if result["warnings"] else "ok"


# ---- the corpus --------------------------------------------------------------------------


@pytest.mark.timing
@pytest.mark.parametrize("path", corpus("translate"), ids=lambda p: p.name)
def test_corpus_translate(client: TestClient, path: Path) -> None:
    body = path.read_bytes()
    start = time.perf_counter()
    status, result = translate(client, body)
    assert time.perf_counter() - start < 2.0
    assert outcome(status, result) == outcome_of(path), result
    for mode in ("audit", "disabled"):
        translate(client, body, mode=mode)
    translate(client, body, accept="application/yaml", namespace="ml")


@pytest.mark.parametrize("path", corpus("translate"), ids=lambda p: p.name)
def test_corpus_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gpu2dra translate -f FILE`: exit 1 with one line on stderr, or exit 0 and YAML."""
    code = main(["translate", "-f", str(path)])
    out, err = capsys.readouterr()
    if outcome_of(path) == "400":
        assert code == 1
        assert err.startswith("gpu2dra: ") and err.count("\n") == 1
    else:
        assert code == 0, err
        list(yaml.safe_load_all(out))
        warned = [line for line in err.splitlines() if line.startswith("warning: ")]
        assert bool(warned) == (outcome_of(path) == "warned"), err


# ---- random input ------------------------------------------------------------------------


@FUZZ
@given(body=st.binary(max_size=400) | st.text(max_size=400).map(str.encode))
def test_random_bytes(client: TestClient, body: bytes) -> None:
    translate(client, body)


@FUZZ
@given(
    body=manifests(),
    mode=st.sampled_from(["enabled", "audit", "disabled"]),
    accept=st.sampled_from(["", "application/yaml"]),
)
def test_random_manifests(client: TestClient, body: bytes, mode: str, accept: str) -> None:
    translate(client, body, accept=accept, mode=mode, namespace="ml")


def _outcome(text: str, jobs: int) -> Any:
    policy = load_policy(CORPUS_POLICY)
    catalog = Catalog.of(policy.device_classes)
    try:
        return translate_text(
            text,
            policy,
            catalog,
            namespace="ml",
            mode="enabled",
            output="yaml",
            jobs=jobs,
            min_bytes=0,
        )
    except ManifestError as err:
        return str(err)


@FUZZ
@given(body=manifests(), comments=st.lists(st.sampled_from(["# c", "  # c", "", "#"]), max_size=4))
def test_the_yaml_output_holds_what_the_json_output_does(body: bytes, comments: list[str]) -> None:
    """Written back as read, or anew with the input's comments, the YAML output reads as the
    same documents the JSON output holds."""
    lines = body.decode("utf-8", "replace").split("\n")
    for i, comment in enumerate(comments):
        lines.insert((i * 7) % (len(lines) + 1), comment)
    text = "\n".join(lines)
    policy = load_policy(CORPUS_POLICY)
    catalog = Catalog.of(policy.device_classes)
    try:
        as_json = orjson.loads(
            translate_text(
                text, policy, catalog, namespace="ml", mode="enabled", output="json"
            ).body
        )
        as_yaml = translate_text(
            text, policy, catalog, namespace="ml", mode="enabled", output="yaml"
        ).body
    except ManifestError:
        return
    read = [d for d in yaml.safe_load_all(as_yaml) if d is not None]
    # as JSON writes them: NaN as null, timestamps as text
    assert orjson.loads(orjson.dumps(read)) == as_json["templates"] + as_json["documents"]


@settings(FUZZ, max_examples=40)
@given(streams=st.lists(manifests(), min_size=2, max_size=4))
def test_streams_cut_into_pieces_translate_as_one(streams: list[bytes]) -> None:
    """The processes `gpu2dra translate` spreads a large stream over give what one would."""
    text = "".join(f"---\n{s.decode('utf-8', 'replace')}\n" for s in streams)
    assert _outcome(text, jobs=2) == _outcome(text, jobs=1)


@settings(FUZZ, max_examples=100)
@given(spec=pod_specs)
def test_translated_pods_gain_no_errors(client: TestClient, spec: Obj) -> None:
    """A Pod as /translate prints it has no error the input had not, as with /mutate."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}}
    try:
        body = orjson.dumps({**pod, "spec": spec})
    except TypeError:  # an integer over 64 bits
        return
    status, result = translate(client, body)
    if status == 200 and result["documents"] and isinstance(result["documents"][0], dict):
        before, after = pod_errors({**pod, "spec": spec}), pod_errors(result["documents"][0])
        assert after <= before and (after or not before), (sorted(before), sorted(after))


# ---- bombs and oversized input -----------------------------------------------------------

BOMBS = [p for p in corpus("translate") if "bomb" in p.name or "laughs" in p.name]


def test_there_are_bombs() -> None:
    assert len(BOMBS) >= 4


@pytest.mark.timing
@pytest.mark.parametrize("path", BOMBS, ids=lambda p: p.name)
def test_bombs_are_refused_quickly(client: TestClient, path: Path) -> None:
    start = time.perf_counter()
    response = client.post("/translate", content=path.read_bytes())
    assert time.perf_counter() - start < 1.0
    assert response.status_code == 400
    assert "YAML aliases" in response.text, response.text


@pytest.mark.timing
@pytest.mark.parametrize("levels", [66, 999, 5_000])
def test_deep_streams_with_anchors_are_refused_quickly(client: TestClient, levels: int) -> None:
    """An anchor sends the stream through PyYAML's pure-Python scanner, quadratic in the
    nesting (4 KB of brackets took 4 s, found by atheris): libyaml checks the depth first."""
    body = b"a: &x 1\nb: " + b"[" * levels + b"]" * levels + b"\n"
    start = time.perf_counter()
    response = client.post("/translate", content=body)
    assert time.perf_counter() - start < 0.5
    assert response.status_code == 400
    assert "nest" in response.text, response.text


@pytest.mark.timing
def test_oversized_bodies_are_413(client: TestClient) -> None:
    """Over the cap by Content-Length, and (chunked, no length) while it is being read."""
    big = b"# " + b"x" * (7 * MiB)
    start = time.perf_counter()
    for path in ("/translate", "/mutate", "/validate"):
        assert client.post(path, content=big).status_code == 413

        def chunks() -> Iterator[bytes]:
            for _ in range(8):
                yield b"#" * MiB

        assert client.post(path, content=chunks()).status_code == 413
    assert time.perf_counter() - start < 5.0


# `gpu2dra translate` in a process of its own, which reports its peak RSS (VmHWM) as it ends:
# the parent's `ru_maxrss` of a child would count the pytest process it was forked from.
CLI = r"""
import re, sys
from app.cli import main
code = main(sys.argv[1:])
peak = re.search(r"VmHWM:\s+(\d+) kB", open("/proc/self/status").read()).group(1)
sys.stderr.write(f"VmHWM {peak}\n")
sys.exit(code)
"""


def run_cli(*args: str, stdin: Any = subprocess.DEVNULL) -> tuple[int, str, float, int]:
    """Exit code, stderr, seconds and peak RSS (bytes) of `gpu2dra translate ...`."""
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CLI, "translate", *args],
        cwd=ROOT,
        stdin=stdin,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        check=False,
        timeout=60,  # a bomb that goes off would run for ever
    )
    seconds = time.perf_counter() - start
    err, _, peak = done.stderr.decode().rpartition("VmHWM ")
    return done.returncode, err, seconds, int(peak) * 1024


@pytest.mark.timing
def test_cli_bombs_and_endless_input_within_bounds() -> None:
    """Bombs fail as fast as a small manifest is translated and grow the process no more than
    that does; endless input stops at the cap (64 MiB), as one line on stderr."""
    small = Path(__file__).parent / "corpus/translate/warned--unicode.yaml"
    code, err, base_seconds, base_rss = run_cli("-f", str(small))
    assert code == 0, err
    for bomb in BOMBS[:3]:
        code, err, seconds, rss = run_cli("-f", str(bomb))
        assert code == 1 and "YAML aliases" in err and err.count("\n") == 1, err
        assert seconds < base_seconds + 10.0
        assert rss < base_rss + 16 * MiB, (bomb.name, rss - base_rss)
    code, err, seconds, rss = run_cli("-f", "/dev/zero")
    assert (code, err) == (1, f"gpu2dra: /dev/zero: larger than {MAX_MANIFEST_BYTES} bytes\n")
    assert seconds < base_seconds + 15.0
    assert rss < base_rss + MAX_MANIFEST_BYTES + 32 * MiB, rss - base_rss
    with open("/dev/zero", "rb") as zero:
        code, err, _, _ = run_cli("-f", "-", stdin=zero)
    assert (code, err) == (1, f"gpu2dra: -: larger than {MAX_MANIFEST_BYTES} bytes\n")
