"""What an unauthenticated client's big SASL token costs everyone else (issue 29 item 2).

    python -m bench.sasl_preauth [--rounds 5]

Starts a daemon with a PLAINTEXT and a SASL_PLAINTEXT listener. A probe client sends ApiVersions on
PLAINTEXT in a loop, one at a time, and records each round trip, while an attacker connection on
SASL_PLAINTEXT sends, per case: a 10 MiB SCRAM client-first or PLAIN message (refused at its size
prefix by ``sasl.server.max.receive.size``), or the largest token the bound lets through (511 KiB):
an unknown ASCII SCRAM user, a known user with a 511 KiB nonce, a PLAIN password of 511 KiB of ASCII
or of non-ASCII text (SASLprep'd on a worker thread), once and by four connections at a time. Prints one JSON line per case: the probe's
median, p99 and max round trip in ms during the attack, and the attack's own time to the close or
the answer. Before the bound, the 10 MiB SCRAM case held every probe for 36.8 s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from groupd.security.scram import make_credential, toml_entry

from tests.support.raw_client import RawClient

MIB = 1024 * 1024
BOUND = 524_288 - 64  # room for the request header and the length prefix


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _frame(token: bytes) -> bytes:
    payload = struct.pack(">hhih", 36, 1, 7, -1) + struct.pack(">i", len(token)) + token
    return struct.pack(">i", len(payload)) + payload


CASES: dict[str, tuple[str, bytes, int]] = {
    "scram_10mib": ("SCRAM-SHA-256", b"n,,n=" + b"u" * (10 * MIB) + b",r=abc", 1),
    "plain_10mib": ("PLAIN", b"\0alice\0" + b"p" * (10 * MIB), 1),
    "scram_unknown_user_max": ("SCRAM-SHA-256", b"n,,n=" + b"u" * BOUND + b",r=abc", 1),
    "scram_nonce_max": ("SCRAM-SHA-256", b"n,,n=alice,r=" + b"r" * BOUND, 1),
    "plain_ascii_max": ("PLAIN", b"\0alice\0" + b"p" * BOUND, 1),
    "plain_non_ascii_max": ("PLAIN", b"\0alice\0" + "é".encode() * (BOUND // 2), 1),
    "plain_non_ascii_max_x4": ("PLAIN", b"\0alice\0" + "é".encode() * (BOUND // 2), 4),
}


def run_case(plain_port: int, sasl_port: int, mechanism: str, token: bytes, attackers: int = 1) -> dict[str, float]:
    took: list[float] = []

    def attack() -> None:
        c = RawClient(sasl_port, timeout=120)
        try:
            assert c.request("SaslHandshake", 1, {"mechanism": mechanism})["error_code"] == 0
            t0 = time.perf_counter()
            try:
                c.sock.sendall(_frame(token))
                c.sock.recv(1 << 16)  # the answer, or the close
            except OSError:
                pass
            took.append(time.perf_counter() - t0)
        finally:
            c.close()

    probe = RawClient(plain_port, timeout=120)
    rtts: list[float] = []
    threads = [threading.Thread(target=attack) for _ in range(attackers)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads) or len(rtts) < 50:
        t0 = time.perf_counter()
        probe.request("ApiVersions", 3, {"client_software_name": "probe", "client_software_version": "1"})
        rtts.append((time.perf_counter() - t0) * 1000)
    for t in threads:
        t.join()
    probe.close()
    rtts.sort()
    return {
        "probe_median_ms": round(statistics.median(rtts), 2),
        "probe_p99_ms": round(rtts[int(len(rtts) * 0.99) - 1], 2),
        "probe_max_ms": round(rtts[-1], 2),
        "attack_s": round(max(took), 3),
        "probes": len(rtts),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="sasl-preauth-"))
    cfg = d / "groupd.toml"
    cfg.write_text(toml_entry("alice", {"SCRAM-SHA-256": make_credential("SCRAM-SHA-256", "pw")}))
    plain, sasl = _free_port(), _free_port()
    log = (d / "groupd.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "groupd",
            "serve",
            "--data-dir",
            str(d / "data"),
            "--config",
            str(cfg),
            "--listeners",
            f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}",
            "--log-level",
            "error",
        ],
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", sasl), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        # warm-up: the first requests compile their codecs, the first SCRAM exchange imports scramp
        run_case(plain, sasl, "SCRAM-SHA-256", b"n,,n=alice,r=abc")
        for name, (mechanism, token, attackers) in CASES.items():
            for _ in range(args.rounds):
                print(json.dumps({"case": name, **run_case(plain, sasl, mechanism, token, attackers)}), flush=True)
    finally:
        proc.terminate()
        proc.wait(15)
        log.close()
        shutil.rmtree(d, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
