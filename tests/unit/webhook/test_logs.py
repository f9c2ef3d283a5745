"""Logs are JSON lines that carry the request uid and never the object."""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import orjson
import pytest

from app.webhook.logs import FIELDS, JsonFormatter, TextFormatter


def test_json_line_with_uid_and_no_extras() -> None:
    record = logging.LogRecord(
        "gpu2dra", logging.INFO, __file__, 1, "mutate %s", ("patched",), None
    )
    record.uid = "abc"
    record.namespace = "ml"
    record.object = {"spec": {"containers": ["secret"]}}  # not a logged field
    entry = orjson.loads(JsonFormatter().format(record))
    assert entry["msg"] == "mutate patched"
    assert entry["uid"] == "abc" and entry["namespace"] == "ml" and entry["level"] == "info"
    assert "object" not in entry and "secret" not in str(entry)
    assert entry["time"].endswith("+00:00")


def test_exceptions_are_one_json_line() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        record = logging.LogRecord(
            "gpu2dra", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )
    line = JsonFormatter().format(record)
    assert "\n" not in line and "RuntimeError: boom" in orjson.loads(line)["error"]


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_configure(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    from app.webhook.logs import configure

    configure("info", fmt)
    logging.getLogger("gpu2dra").info("hello", extra={"uid": "u1"})
    err = capsys.readouterr().err
    assert ('"uid":"u1"' in err) == (fmt == "json") and "hello" in err
    assert ("hello uid=u1\n" in err) == (fmt == "text")


def _admission_record(**fields: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "gpu2dra", logging.INFO, __file__, 1, "mutate %s", ("patched",), None
    )
    record.__dict__.update(fields)
    return record


def test_text_lines_carry_the_fields_json_lines_do() -> None:
    fields = {
        "uid": "705ab4f5",
        "endpoint": "mutate",
        "result": "patched",
        "codes": ["toleration", "visible-devices"],
        "namespace": "ml",
        "kind": "Pod",
        "operation": "CREATE",
        "ms": 0.412,
        "user": "system:serviceaccount:argocd:argocd application controller",
    }
    record = _admission_record(**fields)
    entry = orjson.loads(JsonFormatter().format(record))
    assert {k: entry[k] for k in fields} == fields
    text = TextFormatter().format(record)
    head, pairs = text.split(" mutate patched ", 1)
    assert head.split()[2:] == ["INFO", "gpu2dra"]
    # In the JSON line's order; lists joined with commas, a value with a space quoted.
    assert pairs.split(" ", 8) == [
        "uid=705ab4f5",
        "namespace=ml",
        "kind=Pod",
        "operation=CREATE",
        "result=patched",
        "codes=toleration,visible-devices",
        "ms=0.412",
        "endpoint=mutate",
        'user="system:serviceaccount:argocd:argocd application controller"',
    ]
    assert [p.split("=")[0] for p in pairs.split(" ")[:8]] == [
        f for f in FIELDS if f in fields and f != "user"
    ]
    # No warning, no code: the field is there, empty, as in the JSON line's [].
    assert " codes= " in TextFormatter().format(_admission_record(codes=[], ms=1))


def test_a_text_traceback_comes_below_the_fields() -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        record = logging.LogRecord(
            "gpu2dra", logging.ERROR, __file__, 1, "mutate failed", (), sys.exc_info()
        )
    record.uid = "abc"
    first, *rest = TextFormatter().format(record).splitlines()
    assert first.endswith("mutate failed uid=abc")
    assert rest[-1] == "RuntimeError: boom"


def test_every_line_gpu2dra_serve_writes_is_json(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--offline", "--port", str(port)],
        stderr=subprocess.PIPE,
        text=True,
    )
    watchdog = threading.Timer(60, serve.kill)
    watchdog.start()
    try:
        assert serve.stderr is not None
        lines = []
        for line in serve.stderr:  # until uvicorn says it serves, then a clean stop
            lines.append(line)
            if "Application startup complete" in line:
                serve.send_signal(signal.SIGTERM)
        assert serve.wait() == 0
    finally:
        watchdog.cancel()
    entries = [orjson.loads(line) for line in lines if line.strip()]
    assert all(isinstance(e, dict) and {"time", "level", "msg"} <= e.keys() for e in entries)
    messages = " ".join(e["msg"] for e in entries)  # uvicorn's own lines are among them
    assert "Application startup complete." in messages and "Finished server process" in messages
