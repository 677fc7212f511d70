"""A consumer-group member in its own process, so a test can SIGKILL it.

    python -m tests.support.member_proc BOOTSTRAP GROUP TOPIC [INSTANCE_ID]

Prints ``assigned <n>`` whenever its assignment changes. With ``MEMBER_GROUP_PROTOCOL=consumer`` in
the environment it speaks KIP-848 (the session and heartbeat interval are then the broker's).
"""

from __future__ import annotations

import os
import sys

from confluent_kafka import Consumer


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "client.id": "killable",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
        "enable.auto.commit": False,
    }
    if os.environ.get("MEMBER_GROUP_PROTOCOL") == "consumer":
        del conf["session.timeout.ms"], conf["heartbeat.interval.ms"]  # librdkafka refuses them here
        conf["group.protocol"] = "consumer"
    if len(sys.argv) > 4:
        conf["group.instance.id"] = sys.argv[4]
    c = Consumer(conf)
    c.subscribe([topic])
    last = None
    while True:
        c.poll(0.1)
        n = len(c.assignment())
        if n != last:
            print(f"assigned {n}", flush=True)
            last = n


if __name__ == "__main__":
    main()
