"""A share consumer (confluent-kafka's ``ShareConsumer``, default settings) in its own process, so a
test can SIGKILL or SIGSTOP it.

    python -m tests.support.share_member BOOTSTRAP GROUP TOPIC MODE [VALUE]

Prints ``msg <partition> <offset> <value> <delivery count>`` per record, then, in the explicit
modes, ``acked <offset>:<type> ...`` once ``commit_sync`` confirmed the acknowledgements of a poll.

- ``accept``: implicit acknowledgement (the default mode): a poll accepts the previous poll's
  records; SIGTERM commits the last ones and closes.
- ``release-once``: explicit; releases everything its first non-empty poll got, then closes.
- ``reject VALUE``: explicit; rejects the record whose value is VALUE, accepts the others.
- ``fail VALUE``: explicit; releases the record whose value is VALUE every time (a record that keeps
  failing), accepts the others.
- ``explicit``: explicit; accepts everything, one ``commit_sync`` per poll.
- ``hold``: implicit; stops polling once it has records (it holds them) and prints ``holding``.
"""

from __future__ import annotations

import signal
import sys
import time

from confluent_kafka import AcknowledgeType, ShareConsumer

EXPLICIT = {"release-once", "reject", "fail", "explicit"}


def main() -> None:
    bootstrap, group, topic, mode = sys.argv[1:5]
    arg = sys.argv[5] if len(sys.argv) > 5 else ""
    conf = {"bootstrap.servers": bootstrap, "group.id": group}
    if mode in EXPLICIT:
        conf["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(conf)
    consumer.subscribe([topic])
    stop = False

    def term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, term)
    print("ready", flush=True)
    while not stop:
        msgs = list(consumer.poll(0.5))
        acks = []
        for m in msgs:
            if m.error() is not None:
                print("error", m.error(), flush=True)
                continue
            value = m.value().decode()
            print(f"msg {m.partition()} {m.offset()} {value} {m.delivery_count()}", flush=True)
            if mode in EXPLICIT:
                if mode == "release-once" or (mode == "fail" and value == arg):
                    kind = AcknowledgeType.RELEASE
                elif mode == "reject" and value == arg:
                    kind = AcknowledgeType.REJECT
                else:
                    kind = AcknowledgeType.ACCEPT
                consumer.acknowledge(m, kind)
                acks.append(f"{m.offset()}:{int(kind)}")
        if acks:
            results = consumer.commit_sync(30)
            failed = {str(tp): str(e) for tp, e in results.items() if e is not None}
            # a failed commit names what it carried: the daemon may have made it durable before the
            # failure reached the client (a killed daemon), or not
            print(f"ack-failed {' '.join(acks)} | {failed}" if failed else "acked " + " ".join(acks), flush=True)
        if mode == "hold" and msgs:
            print("holding", flush=True)
            while not stop:
                time.sleep(0.1)
        if mode == "release-once" and msgs:
            break
    if mode == "accept":
        consumer.commit_sync(30)
    consumer.close()
    print("closed", flush=True)


if __name__ == "__main__":
    main()
