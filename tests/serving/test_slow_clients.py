"""A client that sends part of a request and waits is cut off; everyone else is answered."""

from __future__ import annotations

import ssl
import time
from pathlib import Path

import pytest

from tests.serving.process import Serve, request, review, serving

READ_TIMEOUT = 1.0


def closed_within(sock: ssl.SSLSocket, seconds: float) -> float:
    """How long until the server closes `sock`; fails if it is still open after `seconds`."""
    start = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(4096):
            pass  # a 408 or 400 on the way out is fine
    except TimeoutError:
        raise AssertionError(f"still open after {seconds}s") from None
    except (ConnectionError, ssl.SSLError):
        pass
    return time.monotonic() - start


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> object:
    tmp = tmp_path_factory.mktemp("slow")
    with serving(tmp, "--read-timeout", str(READ_TIMEOUT), "--max-concurrency", "8") as s:
        yield s


def test_half_sent_headers_are_cut_off(served: Serve) -> None:
    sock = served.connect()
    sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-")
    assert closed_within(sock, READ_TIMEOUT + 3) >= READ_TIMEOUT - 0.2


def test_headers_sent_a_byte_at_a_time_are_cut_off_too(served: Serve) -> None:
    sock = served.connect()
    sock.settimeout(0.5)
    start = time.monotonic()
    head = b"POST /mutate HTTP/1.1\r\nHost: localhost\r\n" + b"X-Slow: a\r\n" * 100
    try:
        for byte in head:
            sock.sendall(bytes([byte]))
            time.sleep(0.05)
    except (ConnectionError, ssl.SSLError):
        pass
    assert time.monotonic() - start < READ_TIMEOUT + 3, "the trickle was never cut off"


def test_half_a_body_is_cut_off(served: Serve) -> None:
    sock = served.connect()
    sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1000\r\n\r\n{")
    assert closed_within(sock, READ_TIMEOUT + 3) >= READ_TIMEOUT - 0.2


def test_a_connection_that_never_sends_is_cut_off(served: Serve) -> None:
    sock = served.connect()
    closed_within(sock, READ_TIMEOUT + 3)


def test_others_are_answered_while_slow_clients_wait(served: Serve) -> None:
    slow = [served.connect() for _ in range(4)]
    for sock in slow:
        sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Length: 99\r\n\r\n")
    with served.connect() as sock:
        start = time.monotonic()
        status, _ = request(sock, "POST", "/mutate", review())
        assert status == 200 and time.monotonic() - start < 0.5
    for sock in slow:
        closed_within(sock, READ_TIMEOUT + 3)


def test_an_idle_kept_alive_connection_is_not_cut_off(served: Serve) -> None:
    """Between requests uvicorn's keep-alive (120 s) applies, not the read timeout: the API
    server reuses idle connections."""
    with served.connect() as sock:
        assert request(sock, "POST", "/mutate", review("a"))[0] == 200
        time.sleep(READ_TIMEOUT + 1)
        assert request(sock, "POST", "/mutate", review("b"))[0] == 200


def test_past_the_concurrency_limit_a_request_is_answered_503(tmp_path: Path) -> None:
    with serving(tmp_path, "--max-concurrency", "3") as served:
        held = [served.connect() for _ in range(3)]
        with served.connect() as sock:
            assert request(sock, "GET", "/healthz")[0] == 503
        for sock in held[1:]:  # the limit counts the asking connection too
            sock.close()
        time.sleep(0.3)
        with served.connect() as sock:
            assert request(sock, "GET", "/healthz")[0] == 200
        held[0].close()
