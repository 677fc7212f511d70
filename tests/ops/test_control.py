"""The control endpoint: bad input is a 4xx with a JSON message and never hurts the daemon (a table
of hand-picked cases, then hypothesis over JSON documents); the OpenAPI description matches what the
endpoint accepts; injected answers are counted in the metrics; the ``groupd fault`` commands."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from groupd.ops.control import _RULE_FIELDS
from groupd.ops.pytest_plugin import GroupdBroker
from groupd.protocol.errors import ErrorCode
from groupd.protocol.faults import KINDS
from groupd.protocol.messages import API_BY_NAME
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ops.conftest import CliResult, free_port
from tests.support.wire import Wire

REPO = Path(__file__).resolve().parents[2]


def http(url: str, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url.rstrip("/") + path, data=body, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        assert e.headers["Content-Type"].startswith(("application/json", "text/plain")), e.headers
        return e.code, json.loads(raw) if e.headers["Content-Type"].startswith("application/json") else raw.decode()


def raw_http(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").rstrip("/").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)  # a truncated body ends here rather than at the read timeout
        out = b""
        while chunk := s.recv(65536):
            out += chunk
    return out


def assert_alive(broker: GroupdBroker) -> None:
    assert broker.proc is not None and broker.proc.poll() is None
    with Wire(broker.port) as w:
        w.pipeline(("ApiVersions", 3, {"client_software_name": "t", "client_software_version": "1"}))
        assert w.read()[1]["error_code"] == 0
    assert http(broker.control_url or "", "GET", "/faults")[0] == 200


BAD: list[tuple[str, str, bytes | None, int, str]] = [
    ("POST", "/faults", None, 400, "a JSON body is required"),
    ("POST", "/faults", b"{bad", 400, "not JSON"),
    ("POST", "/faults", b"\xff\xfe", 400, "not JSON"),
    ("POST", "/faults", b"[1]", 400, "JSON object"),
    ("POST", "/faults", b"{}", 400, "'api' must be one of"),
    ("POST", "/faults", b'{"api": "Nope", "error": 16}', 400, "'api' must be one of"),
    ("POST", "/faults", b'{"api": "Heartbeat"}', 400, "'kind' must be one of"),
    ("POST", "/faults", b'{"api": "Heartbeat", "kind": "error"}', 400, "'error' is required"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": "NOPE"}', 400, "unknown error 'NOPE'"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 0}', 400, "non-zero int16"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 70000}', 400, "non-zero int16"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": true}', 400, "'error' is required"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "count": 0}', 400, "'count' must be an integer"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "count": "3"}', 400, "'count' must be an integer"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "count": 1.5}', 400, "'count' must be an integer"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "probability": 0}', 400, "in (0, 1]"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "probability": 1.5}', 400, "in (0, 1]"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "probability": NaN}', 400, "a number in (0, 1]"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "group": ""}', 400, "'group' must be a non-empty"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "group": 5}', 400, "'group' must be a non-empty"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "broker": -1}', 400, "'broker' must be an integer"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "colour": 1}', 400, "unknown field(s): colour"),
    ("POST", "/faults", b'{"api": "Heartbeat", "delay_ms": 0}', 400, "'delay_ms' must be an integer"),
    ("POST", "/faults", b'{"api": "Heartbeat", "delay_ms": 300001}', 400, "'delay_ms' must be an integer"),
    ("POST", "/faults", b'{"api": "Heartbeat", "kind": "delay"}', 400, "'delay_ms' is required"),
    ("POST", "/faults", b'{"api": "Heartbeat", "kind": "close", "error": 16}', 400, "only for kind 'error'"),
    ("POST", "/faults", b'{"api": "Heartbeat", "error": 16, "delay_ms": 5}', 400, "only for kind 'delay'"),
    ("POST", "/faults", b'{"api": "Heartbeat", "kind": "explode"}', 400, "'kind' must be one of"),
    ("POST", "/faults", b"[" * 100_000, 413, "limited to"),
    ("DELETE", "/faults/abc", None, 404, "ids are integers"),
    ("DELETE", "/faults/99999999", None, 404, "no fault 99999999"),
    ("GET", "/faults/" + "9" * 40, None, 404, "ids are integers"),
    ("PUT", "/faults", b"{}", 405, "only GET, HEAD, POST and DELETE"),
    ("GET", "/nowhere", None, 404, "see /openapi.json"),
    ("POST", "/openapi.json", b"{}", 405, "only GET"),
    ("GET", "/actions/trigger-rebalance", None, 405, "only POST"),
    ("POST", "/actions/trigger-rebalance", b'{"group": "no-such-group"}', 404, "no group 'no-such-group'"),
    ("POST", "/actions/trigger-rebalance", b'{"group": "g", "broker": 7}', 404, "no broker 7"),
    ("POST", "/actions/trigger-rebalance", b'{"groups": "g"}', 400, "unknown field(s): groups"),
    ("POST", "/actions/expire-member", b'{"group": "g"}', 400, "'member' must be a non-empty"),
    ("POST", "/actions/expire-member", b'{"group": "no-such", "member": "m"}', 404, "no group 'no-such'"),
    # broker actions need a cluster (groupd serve --brokers N); tests/cluster has them on one
    ("POST", "/actions/stop-broker", b'{"broker": 1}', 409, "start groupd with --brokers N"),
    ("POST", "/actions/rebalance-leaders", None, 409, "start groupd with --brokers N"),
    ("POST", "/actions/stop-broker", b"{}", 409, "--brokers N"),
    ("POST", "/actions/stop-broker", b'{"broker": "1"}', 400, "'broker' must be an integer"),
    ("POST", "/actions/start-broker", b'{"broker": 9}', 404, "no broker 9"),
    ("POST", "/actions/isolate-broker", b'{"broker": 1, "isolated": "yes"}', 409, "--brokers N"),
    ("POST", "/actions/move-coordinator", b'{"group": "g", "broker": 1, "x": 1}', 400, "unknown field(s): x"),
    ("GET", "/actions/stop-broker", None, 405, "only POST"),
    ("POST", "/brokers", b"{}", 405, "only GET"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "message"), BAD, ids=[f"{i}" for i in range(len(BAD))])
def test_bad_input_is_a_4xx_with_a_clear_message(
    groupd_broker_session: GroupdBroker, method: str, path: str, body: bytes | None, status: int, message: str
) -> None:
    got_status, doc = http(groupd_broker_session.control_url or "", method, path, body)
    assert got_status == status
    # Every 4xx is the documented JSON problem, the server's own 404/405/413 included.
    assert isinstance(doc, dict), doc
    assert message in doc["message"], doc
    assert set(doc) == {"error", "message"}


def test_malformed_http_is_refused_and_the_daemon_carries_on(groupd_broker_session: GroupdBroker) -> None:
    url = groupd_broker_session.control_url or ""
    for head in (
        b"POST /faults HTTP/1.1\r\nContent-Length: nope\r\n\r\n",
        b"POST /faults HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
        b"POST /faults HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    ):
        assert raw_http(url, head).split(b"\r\n", 1)[0] in (
            b"HTTP/1.1 400 Bad Request",
            b"HTTP/1.1 411 Length Required",
        )
    # A body shorter than its Content-Length: the connection is dropped, nothing else happens.
    assert raw_http(url, b"POST /faults HTTP/1.1\r\nContent-Length: 50\r\n\r\n{}") == b""
    # Not a request at all: a 400 with the JSON problem, then the close (tests/ops/test_control_http.py).
    assert raw_http(url, b"garbage\r\n\r\n").startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert_alive(groupd_broker_session)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "api": st.sampled_from(["Heartbeat", "OffsetCommit", "Nope", ""]) | JSON,
        "kind": st.sampled_from([*KINDS, "x"]) | JSON,
        "error": st.sampled_from(["NOT_COORDINATOR", "nope", 16, 0, -1, 2**40]) | JSON,
        "delay_ms": st.integers(-5, 400_000) | JSON,
        "count": st.integers(-2, 2**40) | JSON,
        "probability": st.floats(-1, 2) | JSON,
        "group": JSON,
        "topic": JSON,
        "client_id": JSON,
        "broker": JSON,
        "member": JSON,
        "extra": JSON,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=FIELDS | JSON, path=st.sampled_from(["/faults", "/actions/expire-member", "/actions/trigger-rebalance"]))
def test_any_json_is_answered_without_a_5xx(groupd_broker_session: GroupdBroker, doc: Any, path: str) -> None:
    url = groupd_broker_session.control_url or ""
    status, answer = http(url, "POST", path, json.dumps(doc).encode())
    assert status in (200, 201, 400, 404, 409), (status, answer)
    if status >= 400:
        assert isinstance(answer, dict) and answer["message"]
    if status == 201:
        assert http(url, "DELETE", f"/faults/{answer['fault']['id']}")[0] == 200


def test_the_daemon_survived_the_fuzzing(groupd_broker_session: GroupdBroker) -> None:
    assert_alive(groupd_broker_session)


def test_openapi_document_is_served_and_matches_the_endpoint(groupd_broker_session: GroupdBroker) -> None:
    status, served = http(groupd_broker_session.control_url or "", "GET", "/openapi.json")
    kept = json.loads((REPO / "ops/openapi/control.json").read_text())
    assert status == 200 and served == kept and kept["openapi"].startswith("3.")
    schemas = kept["components"]["schemas"]
    spec = schemas["FaultSpec"]
    assert set(spec["properties"]) == _RULE_FIELDS and spec["additionalProperties"] is False
    assert set(schemas["Api"]["enum"]) == set(API_BY_NAME)
    assert spec["properties"]["kind"]["enum"] == list(KINDS)
    names = spec["properties"]["error"]["oneOf"][0]["enum"]
    assert set(names) == {e.name for e in ErrorCode if e != 0}
    assert set(kept["paths"]) == {
        "/faults",
        "/faults/{id}",
        "/actions/expire-member",
        "/actions/trigger-rebalance",
        "/actions/expire-locks",
        "/openapi.json",
        "/brokers",
        "/actions/stop-broker",
        "/actions/start-broker",
        "/actions/isolate-broker",
        "/actions/rebalance-leaders",
        "/actions/move-coordinator",
    }


def test_injected_errors_are_answers_of_the_api_and_counted_in_metrics(
    groupd_broker_factory: Callable[..., GroupdBroker],
) -> None:
    metrics_port = free_port()
    broker = groupd_broker_factory(metrics_port=metrics_port)
    broker.faults.add("Heartbeat", error="NOT_COORDINATOR", count=2, group="billing")
    hb = {"group_id": "billing", "generation_id": 1, "member_id": "m", "group_instance_id": None}
    with Wire(broker.port) as w:
        for version in (0, 4):
            w.pipeline(("Heartbeat", version, hb))
            assert w.read()[1]["error_code"] == ErrorCode.NOT_COORDINATOR
        w.pipeline(("Heartbeat", 4, hb))  # spent: the coordinator answers (no such group)
        assert w.read()[1]["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    assert 'groupd_faults_injected_total{api="Heartbeat",kind="error"} 2.0' in text
    assert 'groupd_requests_total{api="Heartbeat",error_code="16",version="4"} 1.0' in text


def test_fault_cli_add_list_clear(groupd_broker_session: GroupdBroker, cli: Callable[..., CliResult]) -> None:
    url = groupd_broker_session.control_url or ""
    r = cli(
        "fault",
        "add",
        "--control",
        url,
        "--api",
        "Heartbeat",
        "--error",
        "NOT_COORDINATOR",
        "--count",
        "3",
        "--group",
        "billing",
    )
    assert r.code == 0 and "Heartbeat: answer NOT_COORDINATOR, next 3, group=billing" in r.out
    r = cli("fault", "add", "--control", url, "--api", "Fetch", "--delay-ms", "200", "--json")
    assert r.code == 0 and json.loads(r.out)["delay_ms"] == 200
    r = cli("fault", "list", "--control", url, "--json")
    assert [f["api"] for f in json.loads(r.out)] == ["Heartbeat", "Fetch"]
    r = cli("fault", "add", "--control", url, "--api", "Heartbeat", "--error", "NOPE")
    assert r.code == 2 and "unknown error 'NOPE'" in r.err
    r = cli("fault", "rebalance", "--control", url, "--group", "no-such")
    assert r.code == 1 and "no group 'no-such'" in r.err
    assert cli("fault", "clear", "--control", url).out.strip() == "cleared 2 fault(s)"
    assert cli("fault", "list", "--control", url).out.strip() == "no faults"
    nobody = free_port()
    r = cli("fault", "list", "--control", f"http://127.0.0.1:{nobody}")
    assert r.code == 1 and "cannot reach the control endpoint" in r.err


def test_fault_cli_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    from groupd.cli import main

    for command in ("add", "list", "clear", "expire-member", "rebalance"):
        with pytest.raises(SystemExit):
            main(["fault", command, "--help"])
        out = capsys.readouterr().out
        assert "examples:\n  groupd fault " + command.split("-")[0] in out.replace("expire-member", "expire")


def test_the_endpoint_is_off_unless_asked_for(groupd_broker_factory: Callable[..., GroupdBroker]) -> None:
    broker = groupd_broker_factory(control_port=-1)
    assert broker.control_url is None
    (listening,) = [json.loads(x) for x in broker.log_path.read_text().splitlines() if "groupd_listening" in x]
    assert "control" not in listening
    with pytest.raises(RuntimeError, match="no control endpoint"):
        broker.faults.list()
