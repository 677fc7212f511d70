"""A client retrying a wrong password is one warning per interval with a count, not two lines per try
(117 lines in 6 s before: ``sasl_authentication_failed`` and ``connection_closed`` each time)."""

from __future__ import annotations

from pathlib import Path

import pytest
from groupd.protocol.errors import ErrorCode

from tests.support.daemon import GroupdProcess

from .conftest import RawClient, listener_ports, security_toml

pytestmark = pytest.mark.e2e


def test_a_wrong_password_in_a_loop_is_one_line_and_a_count(tmp_path: Path) -> None:
    cfg = tmp_path / "groupd.toml"
    cfg.write_text(security_toml())
    d = GroupdProcess(tmp_path / "data", "--config", str(cfg), "--listeners", "SASL_PLAINTEXT://127.0.0.1:0")
    d.start()
    tries = 40
    try:
        port = listener_ports(d)["SASL_PLAINTEXT"]
        for _ in range(tries):
            c = RawClient(port)
            try:
                assert c.request("SaslHandshake", 1, {"mechanism": "PLAIN"})["error_code"] == 0
                r = c.request("SaslAuthenticate", 2, {"auth_bytes": b"\0alice\0guess"})
                assert r["error_code"] == ErrorCode.SASL_AUTHENTICATION_FAILED
                assert c.closed_by_peer()
            finally:
                c.close()
        assert len(d.events("sasl_authentication_failed")) == 1
    finally:
        d.stop()
    lines = d.events("sasl_authentication_failed")
    assert [e["user"] for e in lines] == ["alice", "alice"]
    assert sum(1 + int(e.get("suppressed", 0)) for e in lines) == tries  # type: ignore[call-overload]
    # The close that follows a failed exchange is not a line of its own.
    assert [e for e in d.events("connection_closed") if e.get("reason") == "SASL authentication failed"] == []
