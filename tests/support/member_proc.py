"""A consumer-group member in its own process, so a test can SIGKILL it.

    python -m tests.support.member_proc BOOTSTRAP GROUP TOPIC [INSTANCE_ID]

Prints ``assigned <n>`` whenever its assignment changes. With ``MEMBER_GROUP_PROTOCOL=consumer`` in
the environment it speaks KIP-848 (the session and heartbeat interval are then the broker's).

With ``MEMBER_EVENTS=1`` it reads the topic from the earliest offset with auto-commit and prints,
instead, one line per event: ``assign <t> <p,...>`` / ``revoke <t> <p,...>`` / ``lost <t> <p,...>``
from its rebalance callbacks (``t`` = ``time.monotonic_ns()``, one clock for every process of the
machine), ``msg <partition> <offset>`` per record consumed and ``closed <t>`` once SIGTERM has made
it close (leave the group) cleanly.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    events = os.environ.get("MEMBER_EVENTS") == "1"
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": "killable",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
        "enable.auto.commit": events,
    }
    if events:
        conf["auto.offset.reset"] = "earliest"
    if os.environ.get("MEMBER_GROUP_PROTOCOL") == "consumer":
        del conf["session.timeout.ms"], conf["heartbeat.interval.ms"]  # librdkafka refuses them here
        conf["group.protocol"] = "consumer"
    if len(sys.argv) > 4:
        conf["group.instance.id"] = sys.argv[4]
    stop = False

    def on_term(_sig: int, _frame: Any) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    c = Consumer(conf)

    def report(kind: str) -> Any:
        def callback(_c: Any, parts: list[Any]) -> None:
            print(kind, time.monotonic_ns(), ",".join(str(p.partition) for p in parts) or "-", flush=True)

        return callback

    if events:
        c.subscribe([topic], on_assign=report("assign"), on_revoke=report("revoke"), on_lost=report("lost"))
    else:
        c.subscribe([topic])
    last = None
    while not stop:
        m = c.poll(0.1)
        if events:
            if m is not None and m.error() is None:
                print("msg", m.partition(), m.offset(), flush=True)
            continue
        n = len(c.assignment())
        if n != last:
            print(f"assigned {n}", flush=True)
            last = n
    c.close()
    print("closed", time.monotonic_ns(), flush=True)


if __name__ == "__main__":
    main()
