"""What bounds the API calls a caller can cause under `--secure-metrics`: answers remembered by
token (allowed longer than refused), a bounded memory, a bounded number of reviews in flight,
malformed headers answered without a review, and an API server's failure never remembered.
The reviews themselves run against the real API server in tests/e2e/test_exporter_access.py."""

from __future__ import annotations

import threading

from kubernetes import client

from app.exporter.access import MAX_HEADER, Access, Answer


class Counted(Access):
    """Access whose review answers from a table and counts its calls."""

    def __init__(self, answers: dict[str, Answer], **kwargs: object) -> None:
        self.now = 0.0
        super().__init__(client.ApiClient(), clock=lambda: self.now, **kwargs)  # type: ignore[arg-type]
        self.answers = answers
        self.calls: list[str] = []
        self.gate: threading.Event | None = None

    def _review(self, token: str) -> Answer:
        self.calls.append(token)
        if self.gate is not None:
            self.gate.wait(5)
        answer = self.answers.get(token)
        if answer is None:
            raise RuntimeError("connection refused")
        return answer


OK, NO = Answer(200, "allowed"), Answer(403, "someone may not get /metrics")


def test_malformed_headers_cost_no_review() -> None:
    access = Counted({})
    for header in (None, "", "Bearer", "Bearer  ", "Basic dXNlcg==", "Bearer " + "x" * MAX_HEADER):
        assert access.check(header).status == 401
    assert access.calls == []


def test_answers_are_remembered_allowed_longer_than_refused() -> None:
    access = Counted({"good": OK, "bad": NO})
    for _ in range(3):
        assert access.check("Bearer good") == OK
        assert access.check("bearer bad") == NO
    assert access.calls == ["good", "bad"]
    access.now = 11.0  # a refusal is asked again after ten seconds
    assert access.check("Bearer bad") == NO
    assert access.check("Bearer good") == OK
    assert access.calls == ["good", "bad", "bad"]
    access.now = 121.0  # an allowed token after two minutes
    assert access.check("Bearer good") == OK
    assert access.calls == ["good", "bad", "bad", "good"]


def test_the_memory_is_bounded() -> None:
    access = Counted({f"t{i}": OK for i in range(10)}, size=4)
    for i in range(10):
        access.check(f"Bearer t{i}")
    assert len(access._answers) == 4
    access.check("Bearer t9")  # the newest is still remembered
    access.check("Bearer t0")  # the oldest was forgotten
    assert access.calls[-1] == "t0" and len(access.calls) == 11


def test_an_api_servers_failure_is_503_and_not_remembered() -> None:
    access = Counted({})
    assert access.check("Bearer t").status == 503
    assert access.check("Bearer t").status == 503
    assert access.calls == ["t", "t"]


def test_reviews_in_flight_are_bounded() -> None:
    access = Counted({f"t{i}": OK for i in range(3)}, concurrent=2)
    access.gate = threading.Event()
    threads = [threading.Thread(target=access.check, args=(f"Bearer t{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    while len(access.calls) < 2:
        threading.Event().wait(0.01)
    assert access.check("Bearer t2") == Answer(429, "too many reviews in flight")
    access.gate.set()
    for thread in threads:
        thread.join(5)
    assert access.check("Bearer t2") == OK
