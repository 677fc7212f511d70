"""The control endpoint answers as documented, whatever reaches its socket (issue 29, item 5): a fault
rule naming a broker that does not exist is refused, every 4xx (the server's own 404/405/413/431
included) is ``{"error": ..., "message": ...}``, and what is not an HTTP request (a garbage request
line, binary bytes, a 100 KB header) gets a 400 or 431 with that body before the connection closes,
as from any HTTP server, instead of a silent close."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable

import pytest
from groupd.ops.pytest_plugin import GroupdBroker

from tests.ops.test_control import assert_alive, http


def exchange(url: str, request: bytes, *, half_close: bool = False) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` on a raw socket and read the answer until the server closes: (status,
    headers, body). The client keeps its side open unless ``half_close``: the server must answer
    what it has, not wait for more."""
    host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    assert out, "the connection was closed with no answer"
    head, _, body = out.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
    assert headers.get("connection") == "close"
    assert int(headers["content-length"]) == len(body)
    return int(status_line.split(" ")[1]), headers, body


def problem(headers: dict[str, str], body: bytes) -> dict[str, str]:
    assert headers["content-type"].startswith("application/json"), headers
    doc = json.loads(body)
    assert set(doc) == {"error", "message"} and all(isinstance(v, str) and v for v in doc.values()), doc
    return doc


@pytest.mark.parametrize(
    ("request_bytes", "status", "message"),
    [
        (b"garbage\r\n\r\n", 400, "request line"),
        (b"garbage\r\n", 400, "request line"),
        (b"\x00\x01\x02\xff\xfe binary \x16\x03\x01", 400, "request line"),  # a TLS client hello starts so
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400, "request line"),
        (b"GET /faults\r\n\r\n", 400, "request line"),  # HTTP/0.9
        (b"GET /faults HTTP/2.0\r\n\r\n", 400, "request line"),
        (b"GET /faults HTTP/1.1\r\nno colon here\r\n\r\n", 400, "header line"),
        (b"GET /faults HTTP/1.1\r\nX-Big: " + b"a" * 100_000 + b"\r\n\r\n", 431, "limited to"),
        (b"POST /faults HTTP/1.1\r\nContent-Length: 100000\r\n\r\n" + b"[" * 100_000, 413, "limited to"),
        (b"POST /faults HTTP/1.1\r\nContent-Length: nope\r\n\r\n", 400, "Content-Length"),
        (b"POST /faults HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 411, "Content-Length"),
        (b"PUT /faults HTTP/1.1\r\n\r\n", 405, "only GET, HEAD, POST and DELETE"),
        (b"GET /nowhere HTTP/1.1\r\n\r\n", 404, "see /openapi.json"),
    ],
    ids=[
        "garbage",
        "garbage-line",
        "binary",
        "tls-hello",
        "http09",
        "http2",
        "bad-header",
        "100kb-header",
        "413",
        "bad-length",
        "chunked",
        "405",
        "404",
    ],
)
def test_every_refusal_is_answered_as_json_then_closed(
    groupd_broker_session: GroupdBroker, request_bytes: bytes, status: int, message: str
) -> None:
    url = groupd_broker_session.control_url or ""
    got, headers, body = exchange(url, request_bytes)
    assert got == status, body
    assert message in problem(headers, body)["message"]


def test_a_truncated_head_is_answered_when_the_client_stops_sending(groupd_broker_session: GroupdBroker) -> None:
    url = groupd_broker_session.control_url or ""
    got, headers, body = exchange(url, b"GET /faults HTTP/1.1\r\nHost: x", half_close=True)
    assert got == 400
    problem(headers, body)
    assert_alive(groupd_broker_session)


def test_the_metrics_endpoint_also_answers_garbage_with_400(
    groupd_broker_factory: Callable[..., GroupdBroker],
) -> None:
    from tests.ops.conftest import free_port

    port = free_port()
    broker = groupd_broker_factory(metrics_port=port)
    got, headers, _body = exchange(f"http://127.0.0.1:{port}", b"\x00\x01garbage")
    assert got == 400 and headers["content-type"].startswith("text/plain")
    assert_alive(broker)


def test_a_fault_rule_for_a_broker_that_does_not_exist_is_refused(groupd_cluster: GroupdBroker) -> None:
    url = groupd_cluster.control_url or ""
    status, doc = http(url, "POST", "/faults", b'{"api": "Heartbeat", "error": "NOT_COORDINATOR", "broker": 99}')
    assert status == 400, doc
    assert set(doc) == {"error", "message"} and doc["error"] == "bad_request"
    assert "no broker 99" in doc["message"] and "[1, 2, 3]" in doc["message"]
    assert http(url, "GET", "/faults")[1] == {"faults": []}
    status, doc = http(url, "POST", "/faults", b'{"api": "Heartbeat", "error": "NOT_COORDINATOR", "broker": 3}')
    assert status == 201 and doc["fault"]["broker"] == 3
    assert http(url, "DELETE", "/faults")[0] == 200


def test_a_fault_rule_for_another_broker_is_refused_on_a_single_broker(groupd_broker_session: GroupdBroker) -> None:
    url = groupd_broker_session.control_url or ""
    status, doc = http(url, "POST", "/faults", b'{"api": "Heartbeat", "error": 16, "broker": 99}')
    assert status == 400 and "no broker 99" in doc["message"], doc
