"""Codec throughput: parse and build ops/s per message, with the ratio to baselines measured in the same run.

Baselines: (1) the same schema through construct's interpreted path (``KStruct.parse``), i.e. what
the code would cost without compilation; (2) kio, an independent generated Kafka types package
(native reader), where it has the message.

    python -m bench.codec [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.headers import REQUEST_HEADER


def _rate(fn: Callable[[], Any], seconds: float, repeats: int) -> float:
    """Median ops/s over ``repeats`` runs of about ``seconds`` each."""
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt > 0.05:
            break
        n *= 4
    per_run = max(1, int(n * seconds / dt))
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(per_run):
            fn()
        rates.append(per_run / (time.perf_counter() - t0))
    return statistics.median(rates)


def _cases() -> list[tuple[str, str, int, str, dict[str, Any]]]:
    hb = {
        "group_id": "my-group",
        "generation_id": 5,
        "member_id": "consumer-1-" + str(uuid.uuid4()),
        "group_instance_id": None,
    }
    jg = {
        "group_id": "my-group",
        "session_timeout_ms": 10000,
        "rebalance_timeout_ms": 300000,
        "member_id": "consumer-1-" + str(uuid.uuid4()),
        "group_instance_id": None,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"r" * 60}, {"name": "roundrobin", "metadata": b"o" * 60}],
        "reason": None,
    }
    oc = {
        "group_id": "my-group",
        "generation_id_or_member_epoch": 5,
        "member_id": "consumer-1-" + str(uuid.uuid4()),
        "group_instance_id": None,
        "topics": [
            {
                "name": "orders",
                "partitions": [
                    {
                        "partition_index": i,
                        "committed_offset": 1000 + i,
                        "committed_leader_epoch": 0,
                        "committed_metadata": "",
                    }
                    for i in range(100)
                ],
            }
        ],
    }
    md = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "abcdefghijklmnopqrstuv",
        "controller_id": 1,
        "topics": [
            {
                "error_code": 0,
                "name": f"topic-{t}",
                "topic_id": uuid.uuid4(),
                "is_internal": False,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": p,
                        "leader_id": 1,
                        "leader_epoch": 0,
                        "replica_nodes": [1],
                        "isr_nodes": [1],
                        "offline_replicas": [],
                    }
                    for p in range(10)
                ],
                "topic_authorized_operations": -(2**31),
            }
            for t in range(10)
        ],
    }
    return [
        ("Heartbeat v4 request", "Heartbeat", 4, "request", hb),
        ("JoinGroup v9 request (2 x 60 B protocols)", "JoinGroup", 9, "request", jg),
        ("OffsetCommit v8 request (1 topic x 100 partitions)", "OffsetCommit", 8, "request", oc),
        ("Metadata v12 response (10 topics x 10 partitions)", "Metadata", 12, "response", md),
    ]


def _kio_parse(api: str, version: int, kind: str) -> Callable[[bytes], Any] | None:
    try:
        import importlib

        from kio.serial import entity_reader

        snake = "".join("_" + c.lower() if c.isupper() else c for c in api).lstrip("_")
        mod = importlib.import_module(f"kio.schema.{snake}.v{version}.{kind}")
        cls = getattr(mod, api + kind.capitalize())
        reader = entity_reader(cls)
        return lambda b: reader(b, 0)
    except Exception:
        return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    seconds, repeats = (0.2, 3) if args.quick else (1.0, 5)
    print(f"{'message':52} {'op':6} {'groupd/s':>10} {'interp/s':>10} {'ratio':>6} {'kio/s':>10} {'ratio':>6}")
    for label, api_name, version, kind, value in _cases():
        api = API_BY_NAME[api_name]
        schema = api.request if kind == "request" else api.response
        codec = schema.codec(version)
        body = codec.encode(value)
        if kind == "request":
            hdr_codec = REQUEST_HEADER.codec(2 if api.is_flexible(version) else 1)
            frame = (
                hdr_codec.encode(
                    {
                        "request_api_key": api.key,
                        "request_api_version": version,
                        "correlation_id": 1,
                        "client_id": "consumer-1",
                    }
                )
                + body
            )
            hparse = hdr_codec.parse_at
            parse = codec.parse_at

            def fast(frame: bytes = frame, hparse: Any = hparse, parse: Any = parse) -> Any:
                _, pos = hparse(frame, 0)
                return parse(frame, pos)

            hstruct, bstruct = hdr_codec.struct, codec.struct

            def interp(frame: bytes = frame, hstruct: Any = hstruct, bstruct: Any = bstruct) -> Any:
                import io

                s = io.BytesIO(frame)
                hstruct.parse_stream(s)
                return bstruct.parse_stream(s)
        else:
            parse = codec.parse_at
            bstruct = codec.struct

            def fast(body: bytes = body, parse: Any = parse) -> Any:
                return parse(body, 0)

            def interp(body: bytes = body, bstruct: Any = bstruct) -> Any:
                return bstruct.parse(body)

        r_fast = _rate(fast, seconds, repeats)
        r_interp = _rate(interp, seconds, repeats)
        kio_parse = _kio_parse(api_name, version, kind)
        kio_s = ""
        if kio_parse is not None:
            r_kio = _rate(lambda kp=kio_parse, b=body: kp(b), seconds, repeats)
            kio_s = f"{r_kio:10.0f} {r_fast / r_kio:6.2f}"
        print(f"{label:52} {'parse':6} {r_fast:10.0f} {r_interp:10.0f} {r_fast / r_interp:6.2f} {kio_s}")
        b_fast = _rate(lambda c=codec, v=value: c.encode(v), seconds, repeats)
        b_interp = _rate(lambda s=codec.struct, v=value: s.build(v), seconds, repeats)
        print(f"{label:52} {'build':6} {b_fast:10.0f} {b_interp:10.0f} {b_fast / b_interp:6.2f}")


if __name__ == "__main__":
    main()
