"""Pre-authentication input is bounded (issue 29 item 2): a SASL listener reads at most
``sasl.server.max.receive.size`` (524,288 bytes) per frame until the client has authenticated, as
Kafka's ``SaslServerAuthenticator`` does; a larger frame closes the connection when its size prefix
arrives, before any of it is buffered or parsed. Before, a 10 MiB SCRAM client-first was read whole
and parsed on the event loop: every other client waited 36.8 s.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from tests.support.daemon import GroupdProcess

from .conftest import PASSWORDS, RawClient, SecureDaemon, security_toml

pytestmark = pytest.mark.e2e

TEN_MIB = 10 * 1024 * 1024
_TOKENS = {
    # a SCRAM client-first naming a 10 MiB user, a PLAIN message with a 10 MiB password
    "SCRAM-SHA-256": lambda n: b"n,,n=" + b"u" * n + b",r=abcdefgh",
    "PLAIN": lambda n: b"\0alice\0" + b"p" * n,
}


def _authenticate_frame(token: bytes) -> bytes:
    """SaslAuthenticate v1 (not flexible: bytes with an int32 length), framed."""
    header = struct.pack(">hhih", 36, 1, 7, -1)  # api key, version, correlation id, null client id
    payload = header + struct.pack(">i", len(token)) + token
    return struct.pack(">i", len(payload)) + payload


def _frame_closes(d: SecureDaemon, mechanism: str) -> list[dict]:  # type: ignore[type-arg]
    return [
        e
        for e in d.proc.events("connection_closed")
        if e.get("reason") == "frame size out of bounds" and e.get("sasl_server_max_receive_size") == 524_288
    ]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_a_10_mib_token_is_refused_at_its_size_prefix_while_others_are_answered(
    secure_daemon: SecureDaemon, mechanism: str
) -> None:
    before = len(_frame_closes(secure_daemon, mechanism))
    other = RawClient(secure_daemon.ports["PLAINTEXT"])
    big = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    try:
        assert big.request("SaslHandshake", 1, {"mechanism": mechanism})["error_code"] == 0
        frame = _authenticate_frame(_TOKENS[mechanism](TEN_MIB))
        # Only the first 64 KiB go out: a server that waits for the whole frame before looking at
        # it never closes this connection (the test then fails on closed_by_peer's timeout).
        big.sock.sendall(frame[: 64 * 1024])
        # Another client is answered while the big frame is being sent and refused.
        assert (
            other.request("ApiVersions", 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"]
            == 0
        )
        assert big.closed_by_peer(wait=10.0)
        assert other.request("Metadata", 9, {"topics": None, "allow_auto_topic_creation": False})["brokers"]
    finally:
        big.close()
        other.close()
    deadline = time.monotonic() + 10
    while len(_frame_closes(secure_daemon, mechanism)) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    (ev,) = _frame_closes(secure_daemon, mechanism)[before:]
    assert ev["frame_size"] == len(frame) - 4


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "PLAIN"])
def test_others_are_answered_throughout_a_10_mib_token_sent_whole(secure_daemon: SecureDaemon, mechanism: str) -> None:
    """The whole 10 MiB sent as fast as the socket takes it, from a thread, while another client
    keeps asking: every one of its requests is answered (a parse of the frame on the event loop
    held them for 36.8 s; the per-request timeout of 10 s stands for "not stalled")."""
    other = RawClient(secure_daemon.ports["PLAINTEXT"], timeout=10.0)
    big = RawClient(secure_daemon.ports["SASL_PLAINTEXT"])
    assert big.request("SaslHandshake", 1, {"mechanism": mechanism})["error_code"] == 0
    frame = _authenticate_frame(_TOKENS[mechanism](TEN_MIB))
    outcome: list[BaseException | None] = []

    def blast() -> None:
        try:
            big.sock.settimeout(30)
            big.sock.sendall(frame)
            outcome.append(None)
        except OSError as e:  # the server closed the connection under the sender's feet
            outcome.append(e)

    sender = threading.Thread(target=blast)
    answered = 0
    try:
        sender.start()
        while sender.is_alive() or answered < 20:
            r = other.request("ApiVersions", 3, {"client_software_name": "t", "client_software_version": "1"})
            assert r["error_code"] == 0
            answered += 1
        sender.join()
        assert big.closed_by_peer(wait=10.0)
    finally:
        sender.join(30)
        big.close()
        other.close()
    # It never got the whole frame in: the server reset the connection while it was being sent.
    assert isinstance(outcome[0], (BrokenPipeError, ConnectionResetError)), outcome


def test_frames_above_the_bound_are_read_once_authenticated(secure_daemon: SecureDaemon) -> None:
    """sasl.server.max.receive.size bounds only what comes before authentication: a 900 KB record
    produced by an authenticated confluent-kafka producer is acknowledged."""
    p = Producer(
        {
            "bootstrap.servers": secure_daemon.bootstrap("SASL_PLAINTEXT"),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "SCRAM-SHA-256",
            "sasl.username": "alice",
            "sasl.password": PASSWORDS["alice"],
        }
    )
    errors: list[object] = []
    p.produce("big-after-auth", b"x" * 900_000, on_delivery=lambda err, _msg: errors.append(err))
    assert p.flush(30) == 0
    assert errors == [None]


def test_a_raw_socket_sending_only_a_huge_size_prefix_is_closed(secure_daemon: SecureDaemon) -> None:
    """The first frame of a connection counts too (Kafka reads ApiVersions and SaslHandshake with
    the same bounded receive): 4 bytes announcing 600,000 close it."""
    s = socket.create_connection(("127.0.0.1", secure_daemon.ports["SASL_PLAINTEXT"]), timeout=10)
    try:
        s.sendall(struct.pack(">i", 600_000))
        with contextlib.suppress(ConnectionResetError):
            assert s.recv(1) == b""
    finally:
        s.close()


def test_every_broker_of_a_cluster_bounds_pre_authentication_frames(tmp_path: Path) -> None:
    """``--brokers 2`` with a SASL listener: the second broker's port is bounded the same way, and
    lifts the bound once the client has authenticated (a 600 KB ApiVersions is then answered)."""
    cfg = tmp_path / "groupd.toml"
    cfg.write_text(security_toml())
    # Port 0: each broker any free port (a free port's neighbour need not be free: a fixed port
    # failed under load with "address already in use").
    d = GroupdProcess(
        tmp_path / "data", "--config", str(cfg), "--listeners", "SASL_PLAINTEXT://127.0.0.1:0", "--brokers", "2"
    )
    d.start()
    try:
        (second,) = d.events("broker_listening")
        port2 = int(str(second["listen"]).rsplit(":", 1)[1])
        raw = socket.create_connection(("127.0.0.1", port2), timeout=10)
        try:
            raw.sendall(struct.pack(">i", 600_000))
            with contextlib.suppress(ConnectionResetError):
                assert raw.recv(1) == b""
        finally:
            raw.close()
        c = RawClient(port2, timeout=10)
        try:
            c.login_plain("alice", PASSWORDS["alice"])
            r = c.request("ApiVersions", 3, {"client_software_name": "x" * 600_000, "client_software_version": "1"})
            assert "error_code" in r  # read and answered, whatever it thinks of the name
        finally:
            c.close()
    finally:
        d.stop()
