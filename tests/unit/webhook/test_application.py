"""One HTTP round trip per endpoint, and every bad-input case, through the real ASGI app."""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import yaml
from fastapi.testclient import TestClient

from app.core.policy import load_policy
from app.webhook.application import create_app
from app.webhook.logs import JsonFormatter, TextFormatter
from app.webhook.settings import Settings
from tests.support.fake import FakeCluster
from tests.support.pods import container, gpu
from tests.support.reviews import translated
from tests.unit.admission import patched


def review_body(obj: Any, kind: str = "Pod", group: str = "", **extra: Any) -> bytes:
    return orjson.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": "abc",
                "kind": {"group": group, "version": "v1", "kind": kind},
                "operation": "CREATE",
                "namespace": "ml",
                "object": obj,
                **extra,
            },
        }
    )


POD = {"metadata": {"name": "p"}, "spec": {"containers": [container("c", gpu(1))]}}


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster(labels={"ml": {"gpu2dra.io/migration": "enabled"}})


@pytest.fixture
def client(cluster: FakeCluster) -> Iterator[TestClient]:
    settings = Settings(policy=load_policy(None), max_body=64 * 1024)
    with TestClient(create_app(settings, cluster)) as client:
        yield client


def test_mutate_round_trip(client: TestClient, cluster: FakeCluster) -> None:
    response = client.post("/mutate", content=review_body(POD))
    assert response.status_code == 200
    body = response.json()
    assert body["apiVersion"] == "admission.k8s.io/v1" and body["kind"] == "AdmissionReview"
    answer = body["response"]
    assert answer.pop("uid") == "abc"
    assert patched(POD, answer) == translated(POD, load_policy(None), cluster.catalog)
    assert len(cluster.created) == 1


def test_routine_answers_log_at_debug_and_notable_ones_at_info(
    client: TestClient, cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "gpu2dra")
    answer = client.post("/mutate", content=review_body(POD)).json()["response"]
    assert answer.pop("uid") == "abc"
    assert patched(POD, answer) == translated(POD, load_policy(None), cluster.catalog)

    def ours() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.name == "gpu2dra"]

    assert not ours()  # a translated pod without warnings: the metrics count it
    missing = {**POD, "metadata": {"name": "q"}}
    tpl = {
        "metadata": {"name": "t"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "missing"}}]}
            }
        },
    }
    client.post(
        "/validate", content=review_body(tpl, kind="ResourceClaimTemplate", group="resource.k8s.io")
    )
    (record,) = ours()
    assert record.getMessage() == "validate denied" and record.levelno == logging.INFO
    caplog.clear()
    caplog.set_level(logging.DEBUG, "gpu2dra")
    client.post("/mutate", content=review_body(missing))
    (record,) = ours()
    assert (record.getMessage(), record.levelno) == ("mutate patched", logging.DEBUG)


def test_validate_round_trip(client: TestClient) -> None:
    tpl = {
        "metadata": {"name": "t"},
        "spec": {
            "spec": {
                "devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "missing"}}]}
            }
        },
    }
    body = client.post(
        "/validate", content=review_body(tpl, kind="ResourceClaimTemplate", group="resource.k8s.io")
    ).json()
    assert body["response"] == {
        "uid": "abc",
        "allowed": False,
        "status": {
            "code": 403,
            "message": "ResourceClaimTemplate ml/t: request 'g' names DeviceClass 'missing', "
            "which does not exist",
        },
    }


@pytest.mark.parametrize("path", ["/mutate", "/validate"])
@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{", "body is not JSON"),
        (
            b'{"apiVersion": "v1", "kind": "Pod"}',
            "expected apiVersion admission.k8s.io/v1, kind AdmissionReview",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}',
            "request has no uid",
        ),
    ],
)
def test_malformed_review_is_400(
    client: TestClient, path: str, content: bytes, message: str
) -> None:
    response = client.post(path, content=content)
    assert response.status_code == 400
    assert response.text == f"{message}\n"


def test_oversized_body_is_413(client: TestClient) -> None:
    response = client.post("/mutate", content=b" " * (64 * 1024 + 1))
    assert response.status_code == 413


def test_a_request_nested_deeper_than_python_goes_is_400(client: TestClient) -> None:
    """orjson reads 1,024 levels; printing a count that deep into a warning (or comparing
    it) can go past Python's recursion limit, which the endpoint answers as bad input."""
    body = review_body(POD)
    assert body.count(b'"nvidia.com/gpu":1') == 1
    body = body.replace(b'"nvidia.com/gpu":1', b'"nvidia.com/gpu":' + b"[" * 1000 + b"]" * 1000)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(600)  # below the count's depth, whatever the test runner set
    try:
        response = client.post("/mutate", content=body)
    finally:
        sys.setrecursionlimit(limit)
    assert (response.status_code, response.text) == (400, "request nested too deeply\n")
    metrics = client.get("/metrics").text
    assert 'gpu2dra_requests_total{endpoint="mutate",result="bad-request"} 1.0' in metrics


def test_unexpected_exception_fails_the_call_with_a_500_and_the_uid_logged(
    client: TestClient, cluster: FakeCluster, caplog: pytest.LogCaptureFixture
) -> None:
    def boom(name: str) -> None:
        raise RuntimeError("cache exploded")

    cluster.namespace_labels = boom  # type: ignore[method-assign]
    # Not a verdict: an HTTP 500, so that the API server applies the registration's
    # failurePolicy (a 200 with allowed: false would refuse the pod under Ignore too).
    response = client.post("/mutate", content=review_body(POD))
    assert response.status_code == 500
    assert response.headers["content-type"].startswith("text/plain")
    assert response.text == "gpu2dra internal error (uid abc)\n"
    metrics = client.get("/metrics").text
    assert 'gpu2dra_requests_total{endpoint="mutate",result="error"} 1.0' in metrics
    assert 'gpu2dra_requests_total{endpoint="mutate",result="denied"} 0.0' in metrics
    (record,) = [r for r in caplog.records if r.name == "gpu2dra"]
    assert record.levelno == logging.ERROR and record.getMessage() == "mutate failed"
    assert record.__dict__["uid"] == "abc" and record.exc_info is not None
    # The worker survives: the next request is answered.
    cluster.namespace_labels = lambda name: {}  # type: ignore[method-assign]
    answer = client.post("/mutate", content=review_body(POD)).json()["response"]
    assert answer == {"uid": "abc", "allowed": True}  # a namespace without the label


def test_unexpected_exception_in_validate_fails_the_call_too(
    client: TestClient, cluster: FakeCluster
) -> None:
    async def boom(namespace: str, name: str) -> None:
        raise RuntimeError("cache exploded")

    cluster.template_requests = boom  # type: ignore[method-assign]
    claims = [{"name": "g", "resourceClaimTemplateName": "t"}]
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [], "resourceClaims": claims}}
    response = client.post("/validate", content=review_body(pod))
    assert (response.status_code, response.text) == (500, "gpu2dra internal error (uid abc)\n")
    metrics = client.get("/metrics").text
    assert 'gpu2dra_requests_total{endpoint="validate",result="error"} 1.0' in metrics


MANIFEST = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  template:
    spec:
      containers:
      - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
"""


def test_translate_json(client: TestClient, cluster: FakeCluster) -> None:
    response = client.post("/translate", content=MANIFEST)
    assert response.status_code == 200
    body = response.json()
    assert [d["kind"] for d in body["documents"]] == ["Deployment", "ConfigMap"]
    pod_spec = body["documents"][0]["spec"]["template"]["spec"]
    assert pod_spec["resourceClaims"][0]["name"] == "c-gpu"
    assert body["templates"][0]["metadata"]["namespace"] == "ml"
    # Translated to be applied later: the toleration ExtendedResourceToleration gave it stays.
    assert pod_spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert [w.split(": ", 1)[1].split(" (")[0] for w in body["warnings"]] == [
        "toleration nvidia.com/gpu"
    ]
    assert cluster.created == []  # dry run: nothing is created


def test_translate_yaml_with_warnings(client: TestClient) -> None:
    manifest = MANIFEST.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 99")
    response = client.post(
        "/translate?namespace=other", content=manifest, headers={"accept": "application/yaml"}
    )
    assert response.headers["content-type"].startswith("application/yaml")
    assert response.text.startswith("# warning: document 1 (Deployment web): container 'c'")
    assert [d["kind"] for d in yaml.safe_load_all(response.text)] == ["Deployment", "ConfigMap"]


@pytest.mark.parametrize("brk", ["\\n", "\\r", "\\x85", "\\u2028"])
def test_translate_yaml_warning_with_a_line_break_stays_a_comment(
    client: TestClient, brk: str
) -> None:
    manifest = MANIFEST.replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 99").replace(
        "name: web", f'name: "we{brk}b"'
    )
    response = client.post("/translate", content=manifest, headers={"accept": "application/yaml"})
    assert response.text.startswith("# warning: document 1 (Deployment we b): container 'c'")
    assert [d["kind"] for d in yaml.safe_load_all(response.text)] == ["Deployment", "ConfigMap"]


def test_translate_audit_mode_changes_nothing(client: TestClient) -> None:
    body = client.post("/translate?mode=audit", content=MANIFEST).json()
    assert "resourceClaims" not in body["documents"][0]["spec"]["template"]["spec"]
    assert body["templates"] == []
    assert "would move GPU requests to DRA" in body["warnings"][0]


@pytest.mark.parametrize(
    ("query", "content", "status", "message"),
    [
        ("?mode=bogus", MANIFEST, 400, "mode must be one of enabled, audit, disabled"),
        ("", "kind: [", 400, "document 1: not valid YAML"),
        ("", "- 1\n- 2\n", 400, "document 1: not a Kubernetes object"),
        ("", b"\xff\xfe", 400, "the manifest is not UTF-8 text"),
    ],
)
def test_translate_bad_input(
    client: TestClient, query: str, content: Any, status: int, message: str
) -> None:
    response = client.post(f"/translate{query}", content=content)
    assert response.status_code == status
    assert message in response.text


def test_translate_can_be_turned_off(cluster: FakeCluster) -> None:
    settings = Settings(policy=load_policy(None), translate_enabled=False)
    with TestClient(create_app(settings, cluster)) as client:
        assert client.post("/translate", content=MANIFEST).status_code == 404


def test_health_ready_and_metrics(client: TestClient, cluster: FakeCluster) -> None:
    assert client.get("/healthz").text == "ok\n"
    assert client.get("/readyz").status_code == 200
    client.post("/mutate", content=review_body(POD))
    client.post("/mutate", content=b"{")
    cluster.ready = False
    assert client.get("/readyz").status_code == 503
    metrics = client.get("/metrics").text
    assert 'gpu2dra_requests_total{endpoint="mutate",result="patched"} 1.0' in metrics
    assert 'gpu2dra_requests_total{endpoint="mutate",result="bad-request"} 1.0' in metrics
    assert 'gpu2dra_translations_total{mode="enabled"} 1.0' in metrics
    assert "gpu2dra_request_seconds_bucket" in metrics


def test_draining_is_not_ready(client: TestClient) -> None:
    client.app.draining = True  # type: ignore[attr-defined]
    response = client.get("/readyz")
    assert (response.status_code, response.text) == (503, "shutting down\n")


def test_draining_closes_each_connection_after_its_answer(client: TestClient) -> None:
    assert "connection" not in client.post("/mutate", content=review_body(POD)).headers
    client.app.draining = True  # type: ignore[attr-defined]
    for response in (client.post("/mutate", content=review_body(POD)), client.get("/healthz")):
        assert response.status_code == 200 and response.headers["connection"] == "close"


def test_not_synced_admits_unchanged(client: TestClient, cluster: FakeCluster) -> None:
    cluster.ready = False
    body = client.post("/mutate", content=review_body(POD)).json()["response"]
    assert body == {
        "uid": "abc",
        "allowed": True,
        "warnings": ["gpu2dra has not synced its caches yet; pod admitted unchanged"],
    }
    metrics = client.get("/metrics").text
    assert 'gpu2dra_outcomes_total{code="not-synced",kind="left"} 1.0' in metrics


def test_an_answer_with_warnings_is_logged_with_its_codes(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/operations/logs.md: uid, namespace, kind, operation, result, codes and ms, in the
    JSON lines and the text ones alike."""
    caplog.set_level(logging.INFO, "gpu2dra")
    left = {"metadata": {"name": "p"}, "spec": {"containers": [container("c", gpu(2), gpu(1))]}}
    client.post("/mutate", content=review_body(left))
    (record,) = [r for r in caplog.records if r.name == "gpu2dra"]
    entry = orjson.loads(JsonFormatter().format(record))
    assert {k: entry[k] for k in ("uid", "namespace", "kind", "operation", "result", "codes")} == {
        "uid": "abc",
        "namespace": "ml",
        "kind": "Pod",
        "operation": "CREATE",
        "result": "allowed",
        "codes": ["request-not-limit"],
    }
    assert entry["ms"] >= 0
    text = TextFormatter().format(record)
    assert " uid=abc namespace=ml kind=Pod operation=CREATE result=allowed " in text
    assert " codes=request-not-limit ms=" in text


def test_outcomes_are_counted_by_code(client: TestClient) -> None:
    left = {"metadata": {"name": "p"}, "spec": {"containers": [container("c", gpu(2), gpu(1))]}}
    answer = client.post("/mutate", content=review_body(left)).json()["response"]
    assert "request 1 differs from its limit 2" in answer["warnings"][0]
    client.post("/mutate", content=review_body(POD))  # translated: no code to count
    metrics = client.get("/metrics").text
    assert 'gpu2dra_outcomes_total{code="request-not-limit",kind="left"} 1.0' in metrics
    assert 'gpu2dra_outcomes_total{code="quota",kind="left"} 0.0' in metrics
    counted = [line for line in metrics.splitlines() if line.startswith("gpu2dra_outcomes_total{")]
    assert sum(float(line.rsplit(" ", 1)[1]) for line in counted) == 1.0


class SlowCluster(FakeCluster):
    async def ensure_templates(self, namespace: str, templates: Any) -> None:
        await asyncio.sleep(10)

    async def template_requests(self, namespace: str, name: str) -> Any:
        await asyncio.sleep(10)


@pytest.mark.timing
def test_every_answer_comes_within_the_deadline() -> None:
    cluster = SlowCluster(labels={"ml": {"gpu2dra.io/migration": "enabled"}})
    settings = Settings(policy=load_policy(None), deadline=0.2)
    pod = {
        "spec": {
            "resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}],
            "containers": [{"name": "c"}],
        }
    }
    with TestClient(create_app(settings, cluster)) as client:
        started = time.perf_counter()
        mutated = client.post("/mutate", content=review_body(POD)).json()["response"]
        validated = client.post("/validate", content=review_body(pod)).json()["response"]
        assert time.perf_counter() - started < 2
    assert mutated == {
        "uid": "abc",
        "allowed": True,
        "warnings": ["gpu2dra did not answer within 0.2s; pod admitted unchanged"],
    }
    assert validated == {
        "uid": "abc",
        "allowed": True,
        "warnings": ["gpu2dra could not check DeviceClasses within 0.2s"],
    }


async def asgi(app: Any, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
    """One request through the ASGI app, on the running loop: several can be in flight."""
    messages = [{"type": "http.request", "body": body, "more_body": False}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if messages:
            return messages.pop()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "headers": [(b"content-length", str(len(body)).encode())],
        "server": ("127.0.0.1", 8443),
        "client": ("127.0.0.1", 1),
        "scheme": "https",
        "root_path": "",
    }
    await app(scope, receive, send)
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


def slow_translations(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[str]:
    """Each /translate takes `seconds`; the names of the threads they ran on."""
    threads: list[str] = []

    def slow(*args: Any, **kwargs: Any) -> tuple[int, bytes]:
        threads.append(threading.current_thread().name)
        time.sleep(seconds)
        return 200, b"{}"

    monkeypatch.setattr("app.webhook.application._translate_body", slow)
    return threads


def test_a_translation_past_its_deadline_is_answered_503(
    monkeypatch: pytest.MonkeyPatch, cluster: FakeCluster
) -> None:
    slow_translations(monkeypatch, 1.0)
    settings = Settings(policy=load_policy(None), translate_deadline=0.2)
    with TestClient(create_app(settings, cluster)) as client:
        started = time.perf_counter()
        response = client.post("/translate", content=MANIFEST)
        assert time.perf_counter() - started < 0.8
    assert response.status_code == 503
    assert response.text == "the translation took longer than 0.2s\n"


def test_translations_run_on_threads_of_their_own_and_a_flood_is_refused(
    monkeypatch: pytest.MonkeyPatch, cluster: FakeCluster
) -> None:
    """A flood of large manifests never takes the default executor's threads, which template
    creates and /validate's reads use, nor the thread small manifests are translated on: it
    waits on threads of its own, or is answered 503."""
    threads = slow_translations(monkeypatch, 0.3)
    app = create_app(Settings(policy=load_policy(None), translate_workers=2), cluster)
    app.cluster = cluster
    large = (MANIFEST + "#" * 70_000 + "\n").encode()

    async def flood() -> tuple[list[int], float, float]:
        # 12 large translations: 2 running and 6 waiting (4 per worker), 4 refused at once.
        calls = [asyncio.create_task(asgi(app, "POST", "/translate", large)) for _ in range(12)]
        await asyncio.sleep(0.05)
        started = time.perf_counter()
        await asyncio.to_thread(lambda: None)  # what a template create waits for
        waited = time.perf_counter() - started
        started = time.perf_counter()
        assert (await asgi(app, "POST", "/translate", MANIFEST.encode()))[0] == 200
        small = time.perf_counter() - started
        return [status for status, _ in await asyncio.gather(*calls)], waited, small

    statuses, waited, small = asyncio.run(flood())
    assert sorted(statuses) == [200] * 8 + [503] * 4
    assert waited < 0.1
    assert small < 0.6  # its own 0.3 s, not the 1.2 s the large ones' queue holds
    assert sorted(set(threads)) == [
        "gpu2dra-translate-small_0",  # the small manifest's
        "gpu2dra-translate_0",
        "gpu2dra-translate_1",
    ]
