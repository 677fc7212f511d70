"""Cluster mode on a group workload: one broker vs three (``groupd serve --brokers 1`` and ``--brokers
3``, in the same run) on the same produce + consumer-group pipeline, with real clients
(confluent-kafka / librdkafka at its defaults unless a profile says otherwise).

The pipeline is franz-go's ``TestGroupETL`` in small (issue 29, item 4): a producer writes R records
to a 12-partition topic; an ETL group of 3 members consumes it and produces each record on to a
second topic (committing as it goes); a sink group of 3 members reads the second topic to the end.
Figures per broker count: seconds from the first produce to the last record at the sink, the
daemon's CPU seconds and its CPU microseconds per record, and the ratio three / one.

Profiles:
  franz    the pipeline of franz-go's TestGroupETL itself (bench/franz_etl/main.go: three chained
           groups of 20-partition topics, members joining and leaving, two subtests at once), run
           when franz-go's sources are at hand (--franz-gopath, or $FRANZ_GO_GOPATH: a GOPATH with
           github.com/twmb/franz-go v1.16 and github.com/pierrec/lz4/v4; Debian's /usr/share/gocode
           gives the rest). The issue's figures were this client.
  franz-test  franz-go's own ``TestGroupETL`` (pkg/kgo's test binary, built from --franz-gopath),
           the very test of the issue, at its own settings: KGO_TEST_RECORDS records, replication
           factor 1 on one broker and 3 on three (KGO_TEST_RF), franz-go's INFO logs dropped.
  batched  librdkafka's defaults (linger 5 ms): few, large requests.
  small    what franz-go does by default and its test asks for: no linger, a 50 KB produce buffer,
           25 records per poll, a 5 s fetch wait. Latency-bound: every broker a member talks to
           adds its own stream of small requests, and the three brokers of one process share one
           event loop (the issue's 5x was this shape).

    python -m bench.cluster_group [--quick] [--records R] [--profiles batched,small] [--json out.json]
        [--rounds N] [--brokers 1,3] [--kfake] [--timeline] [--franz-step S]

Where the three brokers' time goes (franz profile, 300,000 records, counted in the daemon):
  1 broker:  ~6 s; Produce 5,105 requests (411 records, 14.7 partitions each), Fetch 1,830 (992
             answered at once with data, 838 parked: 819 woken by an append, 19 by max wait).
  3 brokers: 22-42 s; Produce 72,748 (29 records, 1.7 partitions each), Fetch 65,910 (37,824 at
             once with ~7 records, 28,086 parked: 27,967 woken, 119 by max wait). Server CPU 2.5
             -> 15 s, client CPU 2.8 -> 12 s: the 14-36x requests cost both sides.
  The producer alone (no groups) is 1.05 s vs 1.61 s with 3x the requests. With the groups the
  pipeline is bistable: each client has a request stream per broker, a member's stream to a broker
  carries the 1-2 partitions of its assignment that broker leads, a fetch with min_bytes 1 is woken
  by every such append, and the answer it carries (a few records) is produced on as one small
  request: once the one event loop of the three brokers is busy with them, every round trip (the
  first producer's included, whose 50 KB buffer bounds it) is a few loop iterations of ~10 ms, so
  records arrive slowly and requests stay small (1 run in ~10 stayed coarse: 10.5 s, 18,690
  fetches). A Produce's answer was written two loop polls after its append (its future's callbacks
  answered it, then a callback wrote it, each queued behind a poll of every ready connection): now
  in the append's own iteration (``on_settled``, and an answer ready outside a read is written at
  once), the fetches it wakes too; a fetch parked on a broker that loses its partition is answered
  at once (it waited out its max wait).
  Four alternating rounds, 3 brokers: 69 -> 43 us of server CPU per record (medians), 44 -> 33 s,
  ratio 3/1 5.1 -> 3.8 (a machine loaded by other work: wall figures vary 2x between runs).
  Kafka behaves the same per broker (DelayedFetch answers at min_bytes);
  its brokers are separate processes, so three of them have three times one broker's CPU: here
  they share one loop on a 2-core machine also running the clients. Syscalls are not the cost:
  one read and one write per request, no epoll_ctl churn (strace -c -f, 6 s under load: 12,509
  reads, 12,510 writes, 107 epoll_ctl).

Per request, and why 1.2 is out of reach in one process on two cores (franz profile, 300,000
records, one sitting, builds alternating, requests counted by ``--metrics-port``'s
groupd_requests; 2026-11-29, a 2-core machine shared with other work):
  3 brokers: 48-113k requests (Produce and Fetch ~95%), 11-24 s; server 110-143 us and client
             (franz-go) 86-116 us of CPU per request, for either build. 1 broker: 5.3-8.5k
             requests of 5-15x the records each, 5.8-11.9 s, server 2.0-3.1 s, client 2.4-3.0 s.
  The wall time follows the request count, not the build: the same build ran 11.7 s with 67k
  requests and 24.2 s with 113k. 1 run in ~12 stayed coarse (6.1 s at 3 brokers, ratio ~1.0).
  In the fine regime the clients alone spend 5-10 s of CPU at 3 brokers, as much as the whole
  1-broker run lasts: a server costing nothing would still leave the ratio above 1.2 unless
  the requests stay as large as with one broker, which the server can only bring about by
  answering later than Kafka would (a Produce as soon as its append is written, a Fetch at
  min_bytes: ReplicaManager.appendRecords, DelayedFetch.tryComplete). The appends of one loop
  iteration are all written before any parked fetch is woken (Appender._settle runs the hooks
  after the writes), so a woken fetch already carries every append of its iteration.
  Cut per request here: a tail read resumes where the last one ended (PartitionLog.read's hint:
  ``_find`` 4.1% -> 0.7% of the loop), a new partition's first epoch is recorded at creation
  off the loop (the checkpoint's fsync had run inside the first Produce: ``_append_epoch`` 3.1%
  -> 1.2%), a produced batch is framed in C. Server CPU per request ~125 -> ~118 us (medians of
  four alternating rounds; noise of the same order).
  What would reach it: fetch sessions (KIP-227, which franz-go uses: an incremental Fetch names
  and answers only the partitions that changed, cutting both sides' cost per fetch; groupd
  answers session id 0), a compiled Produce/Fetch path (parse, check, append, read, encode) at
  a fifth of today's ~120 us, and brokers as separate processes only on a machine with cores
  to spare (on two cores shared with the clients three loops add no CPU).

On a quiet machine (2026-11-29, 08:10, no other work; ``--rounds 5 --kfake``, 300,000 records): one
broker 5.8 s in all five rounds, three brokers 10.2, 10.2, 7.3, 15.2, 7.1 s (ratio of medians 1.76),
kfake 5.1-11.2 s on one broker and 5.1-14.2 s on three (0.98). The steps are the test's own: a chain
sleeps 5 s before its second wave of members joins, and franz-go members learn of a rebalance from
their 3 s heartbeats (KGO_DEBUG logs of a slow round: a member that quits after one poll leaves
unconsumed records on its partition, and the group sits idle until the others' next heartbeat,
~3 s; no fetch waited out its max wait, no request failed). A pipeline done before the second wave
ends at ~5.8 s; one that is not waits out one or more heartbeat rounds. One broker is always done
before it (first producer 1.9 s), three brokers not (3.5 s: 11 against 5 us of server CPU per
record, the small requests above), kfake only sometimes on either. So the figure to move is the
three brokers' throughput while the groups run, i.e. the cost of a small Produce or Fetch
(``python -m bench.small_requests``: ~40-48 us each).

franz-go's own TestGroupETL (``--profiles franz-test --records 500000 --rounds 3 --kfake``, the
issue's test itself; 2026-11-29 10:40, quiet machine, after Produce got ~25% cheaper and fetch
sessions came in): one broker 30.8, 23.5, 23.5 s; three brokers 32.1, 22.8, 32.6 s (ratio of
medians 1.36; the issue had 91 s and ~495 s); kfake 36.6, 33.2, 25.4 s on one broker and 28.5,
26.1, 28.1 s on three. Server CPU 5.5 s on one broker, 14.8 s on three (kfake: 2.5 and 4.2 s, on
both cores). Requests at three brokers (``--metrics-port``, an earlier build): 166k Produce and
50k Fetch against kfake's 77k and 26k: each answers as soon as its append is written, and
franz-go keeps up to four Produce requests in flight per broker, so a faster answer makes more,
smaller requests (franz-go v1.16's sink: one in flight, four once the broker answers Produce v4+
to an idempotent producer, ``sink.firstRespCheck``; Kafka too answers one request of a connection
at a time, as groupd).

Where TestGroupETL's time goes at three brokers (issue 29 item 4, 2026-11-29 11:20-12:27, h/cl5;
each round now reports its subtests' own durations (-test.v), its Produce and Fetch requests
(``--metrics-port``, which every build and broker count pays alike: ~3% of the loop in the append
metrics) and the test binary's CPU; ``--timeline`` prints each round's requests per second by API;
franz-go's KGO_LOG_LEVEL=info logs were read beside them, stamped on arrival):
  Phases. The four subtests run one after the other; each sleeps 5 s before its second wave of
  members, whose joins (and a member that quits after one poll without committing) cost each
  group two rebalances, each noticed at the members' next 3 s heartbeat (KGO logs: "heartbeat
  errored ... REBALANCE_IN_PROGRESS" 1.6-3 s after the joins, then again after the quitter left).
  On one broker every subtest is done at or just after the 5 s step: 6.0/6.0/5.6/5.9 s, ~1,000
  Produce and ~300 Fetch requests a second. On three the same chain is not done by then (subtests
  10-25 s, the first one carrying the first producer's 500k records too), so it runs on through
  those rebalances: no idle wait of the server's making (franz-go's logs of a 3-broker run: no
  NOT_LEADER_OR_FOLLOWER or NOT_COORDINATOR, no produce retry, metadata refreshed only as members
  start, first produce to a topic or rejoin; the seconds without Produce/Fetch are the
  rebalances'), and the rebalances are the test's own, paced as Kafka would pace them (the
  heartbeat interval is the client's). What differs is throughput: 4,000-7,000 Produce requests a second of ~45 records
  against ~1,000 of ~390.
  Why. Requests are the client's choice: franz-go has a sink per broker, no linger, four in flight
  each, and its ETL members produce each polled record (100 a poll) at once, split over the
  brokers leading their partitions; a Produce carries what that broker's partitions buffered
  since its last one. 3 brokers: 128-168k Produce and 40-53k Fetch requests in a run against
  16-19k and 4-6k on one (8-9x), for the same 6.5M records. Server CPU per request is the same on
  one broker and three (``bench.small_requests``: a small Produce 34.5 vs 37.8 us, Fetch ~the
  same), and the client pays ~110-140 us per request too: server + client CPU 35-55 s at three
  brokers against 18-21 s at one, for a run that lasts 23 s at best, on a 2-core machine that
  also runs the clients. So three brokers finish a subtest before its step only when the machine
  is otherwise quiet (the 10:40 rounds above: one round in three), and rarely when it is shared
  (11:37-11:50, load average 3-5 from other work: one broker 23.7-35.6 s, three 46.5-61.9 s).
  Kafka at RF 3, acks=all. A Produce completes when every in-sync follower's next fetch has moved
  the high watermark past it (``ReplicaManager.appendRecords`` -> ``maybeAddDelayedProduce``;
  ``DelayedProduce.tryComplete`` -> ``Partition.checkEnoughReplicasReachOffset``; the high
  watermark moves in ``Partition.updateFollowerFetchState`` -> ``maybeIncrementLeaderHW``, which
  also completes consumers' DelayedFetch). groupd's brokers share one log per partition: no
  follower copies anything, and an append is acknowledged and woken at once, as at RF 1: earlier
  than Kafka, never later. Modelled faithfully (tried, not kept: a fetcher per follower and leader
  broker, one fetch in flight, each round two loop iterations carrying everything appended
  meanwhile; acks=all answered and parked fetches woken when every live follower confirmed), the
  same test took 80.5 and 91.3 s at three brokers (two runs; 199-212k Produce, 97-109k Fetch)
  against 34-49 s without: the chain is latency-bound (bounded buffers, 100-record polls), so a
  later answer does not make franz-go's requests larger, only its chain slower.
  Cut per request. ``leader_guard`` (the only per-request work cluster mode adds to Produce and
  Fetch; the leader epoch each append stamps is ~0.7% of the loop) remembers the partitions its
  broker led when last checked, valid while ``Leadership.version`` is unchanged: 2.0 -> 1.35 us
  per 2-partition Produce, 3.3 -> 1.85 us per 4-partition Fetch (a loop of 100k calls); in the
  3-broker py-spy profile its own samples plus ``Leadership.check`` went from 2.6% to 1.2% of the
  daemon. A deleted topic that never moved no longer rewrites and fsyncs ``cluster-leaders.json``
  on the loop (14 samples, ~70 ms, in one 3-broker run on a busy disk: the subtests delete three
  topics each). Both are within the noise of a shared machine. Before (8a315cd, its own venv,
  driven by this bench) and after, in one sitting (11:37-12:27, load average 0.1-5.6 from other
  work), four alternations, ``--rounds 3`` three times then ``--rounds 5``: ratio of medians
  before 1.51, 1.60, 1.65, 1.69, after 2.28 (the most loaded), 1.38, 1.22, 1.22 (1 broker 23.1-31.3
  s, 3 brokers 32.4-36.8 s); over all fourteen rounds each, before 25.0 s (1 broker) and 42.2 s
  (3), ratio 1.69, after 27.7 and 37.0 s, ratio 1.34. Server CPU per request at three brokers
  102-124 us before and 104-131 us after (medians 113 and 111; 250-360 us at one broker: 8x
  fewer, larger requests), the franz-go test's 112-139 us either way; 113-168k Produce and
  29-56k Fetch requests at three brokers against 15-23k and 3-8k at one. A 3-broker subtest that
  finishes before the 5 s step takes 5.4-6.5 s, as on one broker; one that does not takes 10-15 s
  (1 broker has some too: 10.1-12.4 s), and which one happens follows the machine's load: on the
  quietest alternation half the 3-broker subtests made it (ratio 1.22).
  What would reach 1.2 here is fewer requests or a far cheaper one on both sides: 1.2 needs the
  three brokers' ~35-50 CPU-seconds (server + client) to fit in ~28 s of two cores shared with
  other work, which the server alone cannot bring about (a server costing nothing still leaves
  the clients' ~20-25 s).
  On a quiet machine after the merge (12:56, load average 0.4; ``--rounds 3``): one broker 33.8,
  27.7, 23.6 s, three 32.8, 33.4, 33.4 s, ratio of medians 1.21; ~125k Produce and ~40k Fetch at
  three brokers against ~20k and ~5k (again at 13:13: one broker 28.0, 23.5, 23.5 s, three 32.2,
  32.9, 28.4 s, 1.37: one broker had a single subtest past the step, three brokers four of
  twelve). Per subtest at three brokers, roundrobin 6.0-6.5 s and
  cooperative-sticky 5.9 s (a member's partitions mostly led by one broker), range 10.7-10.8 s
  and sticky 10.1-10.8 s (each member's partitions led by all three).

The Fetch path at a fraction of its cost (issue 29 item 4, 2026-11-29 13:35-14:20, h/fetchc):
franz-go's Fetch (v12, a KIP-227 session, 1-2 partitions, min_bytes 1, max wait 5 s) costs the
daemon 281k -> 176k instructions (1 broker) and 289k -> 183k (3 brokers) per incremental fetch
with data, and a parked fetch woken by a one-record Produce ~312k -> ~208k of its pair
(``python -m bench.fetch_callgrind``, its docstring). franz-go's TestGroupETL (``--profiles
franz-test --records 500000 --rounds 1``, three alternations before (0b5b0a9, its own venv) /
after, a machine shared with other work, load average 1.5-7): 3 brokers 66.4 / 56.3 s, 48.9 /
56.9 s and 45.6 / 38.1 s (server CPU 27.1 / 22.2, 23.4 / 25.2 and 21.4 / 18.2 s); one broker
29.1 / 30.5, 27.9 / 24.9 and 25.4 / 35.5 s. Subtests at three brokers (roundrobin, range, sticky,
cooperative-sticky; roundrobin carries the first producer's 500k records): before 21.5/12.3/
16.7/15.5, 17.0/10.5/10.4/10.8, 13.7/10.5/11.7/9.5 s; after 17.9/11.7/12.5/13.8,
23.2/10.8/11.1/11.4, 14.3/11.3/6.4/6.0 s: sticky and cooperative-sticky made the 5 s step in the
last (quietest) round, range in none. Within the noise of this machine, and for a reason: the
run's requests are ~130-157k Produce and ~36-48k Fetch at three brokers, so a Fetch ~30% cheaper
(~6-8 us of ~25-28, ``bench.small_requests``) is ~0.3 s of the server's ~20 s, and the clients'
own ~20-27 s of CPU is untouched. What decides the step is the Produce path (3/4 of the
requests) and the clients' CPU on a machine this loaded.

With both the Produce (``broker/data_plane/_produce.c``) and the Fetch cuts merged (``b4e1514``,
2026-11-29 15:13-15:23, a quiet machine, ``--profiles franz-test --records 500000 --rounds 5``, two
sittings): one broker 23.5 and 23.6 s (medians; rounds 23.4-30.0), three brokers 27.3 and 31.7 s
(27.1-36.3), ratios 1.16 and 1.34, 1.27 over the ten rounds. Three brokers' server CPU 11.2-13.1 s
a run (16.2 before), ~94-110k Produce and ~23-31k Fetch requests. At three brokers sticky missed the 5 s
step in all ten rounds, range in five, roundrobin in one, cooperative-sticky in none. Still
bimodal, so not within 1.2.

The pipeline itself, free of the test's step (issue 29 item 4, 2026-11-29 16:10-17:05). Each
franz-test round also reports its subtests' pipeline times from the daemon's log (``chain_done``:
from the subtest's topics to the first leave of its last group; testChainETL's level 3 has no
member that quits early, so that leave is its last record consumed), and ``--franz-step S`` builds
the test with S seconds before the second wave, so that a pipeline runs to its end undisturbed.
``--profiles franz-test --records 500000``, a quiet machine:
  default step, 5 rounds: wall 23.6 s against 28.1 s (ratio 1.19); pipelines (median of the 20
      subtests) 4.83 against 5.57 s (1.15). A second sitting: wall 27.8 and 27.8 s (1.00: three
      of the one-broker rounds had a subtest stalled by the race below), pipelines 4.82 against
      5.48 s (1.14).
  ``--franz-step 20``, 3 rounds: pipelines 4.79 against 5.24 s (1.09).
What is left between the two:
  The step. A pipeline done ~0.4 s later (5.0-5.6 s on three brokers, 4.6-5.0 s on one) crosses
      the 5 s step, and the second wave's joins then cost its groups two heartbeat-paced
      rebalances: a ~10 s subtest instead of ~5.9 s.
  A client race that stalls a subtest ~4.5 s. After an eager rebalance franz-go validates each
      kept partition's committed offset (OffsetForLeaderEpoch) and lists the start of a partition
      nobody committed (ListOffsets); each answer makes its partition fetchable, and a source
      fetches as soon as one is. When the kept partitions (read to their end) come first, that
      fetch parks for its 5 s max wait and the new partition waits behind it: franz-go v1.16 never
      interrupts a fetch in flight when a partition is added (``source.addCursor``). In the
      daemon's log: a full fetch parked on partitions at their end, and the new partition's first
      fetch (offset 0) arriving as it expires. Sticky on three brokers met it in 3 of 3 rounds
      (pipelines 9.5-9.7 s), range now and then, one broker in 1 subtest of 12. Kafka parks the
      same fetch the same way (``DelayedFetch``: min bytes or max wait).
  The machine. During a three-broker pipeline both cores are busy (~180-185% of 200%: franz-go
      ~110%, the daemon ~68%; one broker ~130% and ~48%). In franz-go's samples (perf, three
      brokers) the test's own loop outside its Produce calls (its per-record maps and checks) is
      ~25%, building Produce requests ~11%, reading Fetch answers ~12%, system calls ~11%.
  The daemon's CPU is not what holds it now: 20 us of busy work added to every Produce (~20% more
      daemon CPU) left the three-broker pipeline's records per second within the spread of
      unchanged rounds (230-510k/s over the three levels either way, against 430-710k/s on one
      broker). Tried and dropped, each slower: answering every Produce 1 ms later (157-164k
      Produce requests instead of ~97k), dispatching a connection's next held request inside
      the append's iteration, running the daemon at nice -10 or +10.

Every process runs on 127.0.0.1 and is stopped by pid; every load is bounded in count and time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

from .targets import Target, cpu_seconds, start_groupd, workdir

PARTITIONS = 12
MEMBERS = 3
VALUE = b"0123456789abcdef" * 4

PROFILES: dict[str, dict[str, dict[str, Any]]] = {
    "batched": {"producer": {}, "consumer": {}, "poll": {"n": 500}},
    "small": {
        "producer": {"linger.ms": 0, "queue.buffering.max.kbytes": 49, "queue.buffering.max.messages": 10000},
        "consumer": {"fetch.wait.max.ms": 5000},
        "poll": {"n": 25},
    },
}


def _produce(producer: Any, topic: str, key: bytes, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value)
            return
        except BufferError:
            producer.poll(0.01)


def _pipeline(bootstrap: str, records: int, profile: dict[str, dict[str, Any]], deadline: float) -> dict[str, Any]:
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    run = uuid.uuid4().hex[:8]
    src, dst = f"src-{run}", f"dst-{run}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(t, PARTITIONS, 1) for t in (src, dst)]).values():
        fut.result(30)
    base = {"bootstrap.servers": bootstrap}
    pconf = {**base, **profile["producer"]}
    cconf = {**base, "auto.offset.reset": "earliest", **profile["consumer"]}
    batch = profile["poll"]["n"]
    stop = threading.Event()
    lock = threading.Lock()
    seen: set[int] = set()
    errors: list[str] = []

    def producer() -> None:
        p = Producer(pconf)
        for i in range(records):
            _produce(p, src, str(i).encode(), VALUE)
            if i % 1000 == 0:
                p.poll(0)
        p.flush(60)

    def etl() -> None:
        c = Consumer({**cconf, "group.id": f"etl-{run}"})
        p = Producer(pconf)
        c.subscribe([src])
        try:
            while not stop.is_set():
                msgs = c.consume(batch, 0.1)
                for m in msgs:
                    if m.error():
                        continue
                    _produce(p, dst, m.key(), m.value())
                p.poll(0)
                if msgs:
                    c.commit(asynchronous=True)
        except Exception as exc:  # reported, not raised in a thread
            errors.append(repr(exc))
        finally:
            p.flush(30)
            c.close()

    def sink() -> None:
        c = Consumer({**cconf, "group.id": f"sink-{run}"})
        c.subscribe([dst])
        try:
            while not stop.is_set():
                got = [int(m.key()) for m in c.consume(batch, 0.1) if not m.error()]
                if got:
                    with lock:
                        seen.update(got)
                        if len(seen) >= records:
                            stop.set()
        except Exception as exc:
            errors.append(repr(exc))
        finally:
            c.close()

    threads = [threading.Thread(target=fn, daemon=True) for fn in [producer] + [etl] * MEMBERS + [sink] * MEMBERS]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    while not stop.is_set() and time.monotonic() < deadline:
        stop.wait(0.2)
    elapsed = time.perf_counter() - t0
    stop.set()
    for t in threads:
        t.join(30)
    return {"seconds": elapsed, "delivered": len(seen), "complete": len(seen) >= records, "errors": errors[:3]}


def _build_franz(root: Path, gopath: Path) -> Path:
    """bench/franz_etl built in GOPATH mode (no module proxy: franz-go from ``gopath``)."""
    out = root / "franz-etl"
    src = root / "gopath" / "src" / "franzetl"
    src.mkdir(parents=True)
    shutil.copy(Path(__file__).with_name("franz_etl") / "main.go", src / "main.go")
    env = {**os.environ, "GO111MODULE": "off", "GOFLAGS": "", "GOPATH": f"/usr/share/gocode:{gopath}:{root / 'gopath'}"}
    subprocess.run(["go", "build", "-o", str(out), "."], cwd=src, env=env, check=True, timeout=600)
    return out


_STEP = "time.Sleep(5 * time.Second)"  # testChainETL's wait before its second wave of members


def _build_franz_test(root: Path, gopath: Path, step: int = 5) -> Path:
    """franz-go's pkg/kgo test binary (``go test -c``) in GOPATH mode: TestGroupETL as shipped, or
    with ``step`` seconds before testChainETL's second wave (a copy of the package, first on the
    GOPATH: the rest of franz-go still comes from ``gopath``)."""
    out = root / ("kgo.test" if step == 5 else f"kgo-step{step}.test")
    pkg = gopath / "src" / "github.com" / "twmb" / "franz-go" / "pkg" / "kgo"
    paths = f"{gopath}:/usr/share/gocode"
    if step != 5:
        copy_root = root / f"kgo-step{step}"
        copy = copy_root / "src" / "github.com" / "twmb" / "franz-go" / "pkg" / "kgo"
        shutil.copytree(pkg, copy)
        helpers = copy / "helpers_test.go"
        text = helpers.read_text()
        if text.count(_STEP) != 1:
            raise RuntimeError(f"--franz-step: {_STEP!r} not found once in {helpers}")
        helpers.write_text(text.replace(_STEP, f"time.Sleep({step} * time.Second)"))
        pkg, paths = copy, f"{copy_root}:{paths}"
    env = {**os.environ, "GO111MODULE": "off", "GOFLAGS": "", "GOPATH": paths}
    subprocess.run(["go", "test", "-c", "-o", str(out), "."], cwd=pkg, env=env, check=True, timeout=900)
    return out


def chain_done(log_lines: list[str]) -> list[float]:
    """Seconds from each TestGroupETL subtest's start to the end of its pipeline, read from the
    daemon's JSON log: a subtest starts with its topics' creation (the first subtest with the first
    producer's topic), and its pipeline is done when the first member of its last group leaves.
    That group (testChainETL's level 3) has no member that quits early: its members leave only
    once everything produced to it was consumed (the test's ``consumed == testRecordLimit``), and
    its level is the last to get there. Free of the test's own step when the step is longer than
    the pipeline (``--franz-step``); with the test's 5 s, a pipeline not done by then also carries
    the rebalances the second wave brings."""
    starts: list[float] = []
    first_seen: dict[str, float] = {}
    first_left: dict[str, float] = {}
    prev = None
    for line in log_lines:
        try:
            e = json.loads(line)
            ev = e["event"]
            at = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if ev in ("topic_created", "topic_deleted"):
            if ev == "topic_created" and prev != "topic_created":
                starts.append(at)
            prev = ev
        group = e.get("group")
        if not isinstance(group, str):
            continue
        first_seen.setdefault(group, at)
        if ev == "member_left":
            first_left.setdefault(group, at)
    out = []
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else float("inf")
        groups = [g for g, at in first_seen.items() if start <= at < end]
        left = [first_left[g] for g in groups if g in first_left and first_left[g] < end]
        if groups and len(left) == len(groups):
            out.append(max(left) - start)
    return out


def _franz_test(binary: Path, bootstrap: str, records: int, brokers: int, timeout: float) -> dict[str, Any]:
    env = {
        **os.environ,
        "KGO_SEEDS": bootstrap,
        "KGO_TEST_RECORDS": str(records),
        "KGO_TEST_RF": str(min(brokers, 3)),
        "KGO_LOG_LEVEL": "none",
    }
    t0 = time.perf_counter()
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(
            [
                str(binary),
                "-test.run",
                "^TestGroupETL$",
                "-test.count",
                "1",
                "-test.v",
                "-test.timeout",
                f"{int(timeout)}s",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=binary.parent,
            timeout=timeout + 30,
        )
    except subprocess.TimeoutExpired:
        return {"seconds": time.perf_counter() - t0, "delivered": 0, "complete": False, "errors": ["timeout"]}
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the test binary's, reaped by run()
    complete = proc.returncode == 0 and "PASS" in proc.stdout
    # the subtests' own durations (one per balancer, run one after the other): which phase is slow
    subtests = {m[1]: float(m[2]) for m in re.finditer(r"--- PASS: TestGroupETL/(\S+) \(([0-9.]+)s\)", proc.stdout)}
    return {
        "subtests": subtests,
        "client_cpu_s": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime,
        "seconds": time.perf_counter() - t0,
        "delivered": records if complete else 0,
        "complete": complete,
        "errors": [] if complete else [(proc.stdout + proc.stderr)[-300:]],
    }


def _build_kfake(root: Path, gopath: Path) -> Path | None:
    """bench/franz_etl/kfake (franz-go's kfake with N brokers in one process) built in GOPATH mode,
    or None with the reason printed. kfake of franz-go v1.16 calls ``bytes.Clone`` (Go 1.20): on an
    older Go the copy built here calls an equivalent of its own instead (the fake is otherwise as
    shipped). Its SCRAM code needs golang.org/x/crypto (Debian: golang-golang-x-crypto-dev)."""
    src_pkg = gopath / "src" / "github.com" / "twmb" / "franz-go" / "pkg" / "kfake"
    if not src_pkg.is_dir():
        print(f"kfake reference skipped: no {src_pkg}", flush=True)
        return None
    kroot = root / "kfgo"
    pkg = kroot / "src" / "github.com" / "twmb" / "franz-go" / "pkg" / "kfake"
    shutil.copytree(src_pkg, pkg)
    version = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    minor = int(version.removeprefix("go").split(".")[1]) if version.startswith("go1.") else 99
    if minor < 20:
        for f in pkg.glob("*.go"):
            text = f.read_text()
            if "bytes.Clone(" not in text:
                continue
            text = text.replace("bytes.Clone(", "cloneBytes(")
            if "bytes." not in text:
                text = text.replace('\t"bytes"\n', "", 1)
            f.write_text(text)
        (pkg / "zz_clone_go119.go").write_text(
            "package kfake\n\nfunc cloneBytes(b []byte) []byte {\n\tif b == nil {\n\t\treturn nil\n\t}\n"
            "\treturn append([]byte{}, b...)\n}\n"
        )
    main_dir = kroot / "src" / "kfakeref"
    main_dir.mkdir(parents=True)
    shutil.copy(Path(__file__).with_name("franz_etl") / "kfake" / "main.go", main_dir / "main.go")
    out = root / "kfake-ref"
    env = {**os.environ, "GO111MODULE": "off", "GOFLAGS": "", "GOPATH": f"{kroot}:{gopath}:/usr/share/gocode"}
    build = subprocess.run(["go", "build", "-o", str(out), "."], cwd=main_dir, env=env, capture_output=True, text=True)
    if build.returncode != 0:
        print(f"kfake reference skipped: build failed: {build.stderr.strip()[-300:]}", flush=True)
        return None
    return out


def _one_kfake(
    binary: Path, brokers: int, franz: Path, records: int, timeout: float, test: bool = False
) -> dict[str, Any]:
    """The franz pipeline (or franz-go's own test) against kfake with ``brokers`` brokers (one
    process, as groupd's)."""
    proc = subprocess.Popen(
        [str(binary), str(brokers)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL
    )
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().decode().strip()
        cpu0 = cpu_seconds(proc.pid)
        out = (
            _franz_test(franz, bootstrap, records, brokers, timeout)
            if test
            else _franz(franz, bootstrap, records, timeout)
        )
        cpu1 = cpu_seconds(proc.pid)
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    counts = [line for line in err.decode(errors="replace").splitlines() if line.startswith("{")]
    out["requests"] = json.loads(counts[-1]) if counts else None
    cpu = (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None
    out["server_cpu_s"] = cpu
    out["cpu_us_per_record"] = cpu / records * 1e6 if cpu is not None else None
    return out


def _franz(binary: Path, bootstrap: str, records: int, timeout: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [str(binary), bootstrap, str(records), "etl", "range,cooperative-sticky"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"seconds": time.perf_counter() - t0, "delivered": 0, "complete": False, "errors": ["timeout"]}
    done = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    complete = proc.returncode == 0 and any("total_seconds" in d for d in done)
    # main.go's first producer prints when its records are all acknowledged: the produce side's own
    # time, which the groups' rebalances (paced by franz-go's 3 s heartbeats) do not quantize
    produced = re.search(r"produced \d+ in ([0-9.]+)s", proc.stderr)
    return {
        "producer_seconds": float(produced.group(1)) if produced else None,
        "seconds": time.perf_counter() - t0,
        "delivered": records if complete else 0,
        "complete": complete,
        "errors": [] if complete else [proc.stderr[-300:]],
    }


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _requests(port: int) -> dict[str, int]:
    """Requests answered so far by API name (``--metrics-port``'s groupd_requests, every broker)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, int] = {}
    for m in re.finditer(r'^groupd_requests_total\{api="(\w+)",[^}]*\} ([0-9.e+]+)$', text, re.M):
        out[m[1]] = out.get(m[1], 0) + int(float(m[2]))
    return out


TIMELINE_APIS = ("Produce", "Fetch", "JoinGroup", "SyncGroup", "Heartbeat", "LeaveGroup", "OffsetCommit")


def _sample_timeline(port: int, stop: threading.Event, rows: list[list[Any]]) -> None:
    """Requests answered in each second of a run, by API (``--timeline``): the phases of a run
    (rebalances show as JoinGroup/SyncGroup bursts, idle waits as seconds without Produce/Fetch)."""
    t0 = time.perf_counter()
    try:
        prev = _requests(port)
    except OSError:
        return
    while not stop.wait(1.0):
        try:
            cur = _requests(port)
        except OSError:
            return
        rows.append([round(time.perf_counter() - t0, 1), {a: cur.get(a, 0) - prev.get(a, 0) for a in TIMELINE_APIS}])
        prev = cur


def _one(
    root: Path, brokers: int, name: str, records: int, timeout: float, franz: Path | None, timeline: bool = False
) -> dict[str, Any]:
    t: Target
    port = _free_port()
    t, _ = start_groupd(root / f"{name}-b{brokers}" / "data", "--brokers", str(brokers), "--metrics-port", str(port))
    counts: dict[str, int] | None = None
    rows: list[list[Any]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample_timeline, args=(port, stop, rows), daemon=True)
    if timeline:
        sampler.start()
    try:
        cpu0 = t.cpu_s()
        if name == "franz":
            assert franz is not None
            out = _franz(franz, t.bootstrap, records, timeout)
        elif name == "franz-test":
            assert franz is not None
            out = _franz_test(franz, t.bootstrap, records, brokers, timeout)
            if t.log_path is not None:
                out["chain_done"] = chain_done(t.log_path.read_text(errors="replace").splitlines())
        else:
            out = _pipeline(t.bootstrap, records, PROFILES[name], time.monotonic() + timeout)
        cpu1 = t.cpu_s()
        try:
            counts = _requests(port)
        except OSError:
            counts = None
    finally:
        stop.set()
        if timeline:
            sampler.join(10)
        t.stop()
    if timeline:
        out["timeline"] = rows
    out["requests"] = {"0": counts.get("Produce", 0), "1": counts.get("Fetch", 0)} if counts else None
    cpu = (cpu1 - cpu0) if cpu0 is not None and cpu1 is not None else None
    out["server_cpu_s"] = cpu
    out["cpu_us_per_record"] = cpu / records * 1e6 if cpu is not None else None
    return out


def _median(values: list[float]) -> float | None:
    """The median (the lower middle one of an even count), None for no values."""
    return sorted(values)[(len(values) - 1) // 2] if values else None


def _median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The round of median wall time (the lower middle one of an even count)."""
    return sorted(runs, key=lambda r: r["seconds"])[(len(runs) - 1) // 2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.cluster_group", description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="20,000 records, the batched profile only")
    ap.add_argument("--records", type=int, default=None, help="records through the pipeline (default 200,000)")
    ap.add_argument(
        "--profiles", default=None, help="comma-separated: " + ", ".join([*PROFILES, "franz", "franz-test"])
    )
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one pipeline may take")
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="alternating rounds (1, 3, 1, 3, ...) per profile; the ratio is of the medians (the pipeline is "
        "bimodal on any server, kfake's three brokers too: one round proves little)",
    )
    ap.add_argument(
        "--brokers",
        default="1,3",
        help="broker counts to run, comma-separated (default 1,3; '3' alone: one build's three-broker "
        "subtests, no ratio)",
    )
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument(
        "--timeline",
        action="store_true",
        help="print each groupd round's requests per second by API (Produce, Fetch, the group APIs)",
    )
    ap.add_argument(
        "--franz-gopath",
        type=Path,
        default=os.environ.get("FRANZ_GO_GOPATH") or None,
        help="a GOPATH holding franz-go v1.16 (the franz profile; default $FRANZ_GO_GOPATH)",
    )
    ap.add_argument(
        "--franz-step",
        type=int,
        default=5,
        help="franz-test: seconds testChainETL waits before its second wave (default 5, the test as shipped; "
        "longer, e.g. 20: each subtest's pipeline runs to its end before the rebalances of the second wave, "
        "and its time from the daemon's log measures the pipeline itself)",
    )
    ap.add_argument(
        "--kfake",
        action="store_true",
        help="with the franz profile: the same rounds against franz-go's kfake with 1 and 3 brokers (a peer whose "
        "brokers are one process too), built from --franz-gopath",
    )
    args = ap.parse_args(argv)
    counts = [int(b) for b in args.brokers.split(",")]
    if not counts or any(b not in (1, 3) for b in counts):
        ap.error("--brokers: 1, 3 or 1,3")
    records = args.records or (20_000 if args.quick else 200_000)
    default = "batched" if args.quick else "batched,small" + (",franz" if args.franz_gopath else "")
    names = (args.profiles or default).split(",")
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        print("bench.cluster_group: confluent-kafka is not installed (make .venv/.dev)", file=sys.stderr)
        return 1
    root = workdir("groupd-bench-cluster-group-")
    results: dict[str, Any] = {"records": records, "profiles": {}}
    ok = True
    try:
        franz = franz_test = None
        for go_name in ("franz", "franz-test"):
            if go_name in names and args.franz_gopath is None:
                print(f"{go_name} profile: no --franz-gopath / $FRANZ_GO_GOPATH, skipped", flush=True)
                names.remove(go_name)
        if "franz" in names:
            franz = _build_franz(root, args.franz_gopath)
        if "franz-test" in names:
            franz_test = _build_franz_test(root, args.franz_gopath, args.franz_step)
        go_client = franz or franz_test
        kfake = _build_kfake(root, args.franz_gopath) if args.kfake and go_client is not None else None
        for name in names:
            # the small profile costs ~100x the CPU per record of the batched one (every record
            # is a request): a quarter of the records
            n = records // 4 if name == "small" else records
            runs: dict[int, list[dict[str, Any]]] = {1: [], 3: []}
            peer: dict[int, list[dict[str, Any]]] = {1: [], 3: []}
            for i in range(max(1, args.rounds)):
                for b in counts:
                    # a fresh data directory per round: a second round must not find the first's topics
                    client = franz_test if name == "franz-test" else franz
                    runs[b].append(_one(root / f"round{i}", b, name, n, args.timeout, client, args.timeline))
                if name in ("franz", "franz-test") and kfake is not None:
                    client = franz_test if name == "franz-test" else franz
                    assert client is not None
                    for b in counts:
                        peer[b].append(_one_kfake(kfake, b, client, n, args.timeout, test=name == "franz-test"))
            ok = ok and all(r["complete"] for b in counts for r in runs[b])

            def fmt(r: dict[str, Any], rs: list[dict[str, Any]], n: int = n) -> str:
                cpu = r["server_cpu_s"]
                bad = [x for x in rs if not x["complete"]]
                extra = f" INCOMPLETE {len(bad)} round(s): {bad[0]['errors']}" if bad else ""
                each = "" if len(rs) == 1 else "  rounds: " + ", ".join(f"{x['seconds']:.1f}" for x in rs)
                ps = sorted(x["producer_seconds"] for x in rs if x.get("producer_seconds") is not None)
                if ps:
                    each += f"; first producer done in {ps[(len(ps) - 1) // 2]:.1f} s (median)"
                return f"{r['seconds']:6.1f} s, server CPU {cpu:5.1f} s ({r['cpu_us_per_record']:.0f} us/record){extra}{each}"

            def reqs(r: dict[str, Any]) -> str:
                c = r.get("requests") or {}
                return f", {c.get('0', 0):,} Produce, {c.get('1', 0):,} Fetch requests"

            def each_round(b: int, rs: list[dict[str, Any]]) -> None:
                for i, x in enumerate(rs):
                    client = x.get("client_cpu_s")
                    extra = f", client CPU {client:.1f} s" if client is not None else ""
                    if x.get("subtests"):
                        extra += " (subtests " + "/".join(f"{v:.1f}" for v in x["subtests"].values()) + " s)"
                    if x.get("chain_done"):
                        extra += " (pipelines done at " + "/".join(f"{v:.2f}" for v in x["chain_done"]) + " s)"
                    print(
                        f"    {b} broker(s) round {i + 1}: {x['seconds']:.1f} s, server CPU {x['server_cpu_s']:.1f} s"
                        f"{extra}{reqs(x)}",
                        flush=True,
                    )

            what = "" if args.rounds <= 1 else f", median of {args.rounds} alternating rounds"
            print(f"{name} profile, {n} records{what}", flush=True)
            results["profiles"][name] = {"rounds": runs}
            for b in counts:
                med = _median_run(runs[b])
                results["profiles"][name][str(b)] = med
                label = "1 broker: " if b == 1 else "3 brokers:"
                print(f"  {label} {fmt(med, runs[b])}", flush=True)
            if len(counts) == 2:
                ratio = _median_run(runs[3])["seconds"] / _median_run(runs[1])["seconds"]
                results["profiles"][name]["ratio"] = ratio
                verdict = "within" if ratio <= 1.2 else "NOT within"
                print(f"  ratio 3/1: {ratio:.2f} ({verdict} the 1.2 target)", flush=True)
                done = {b: _median([v for x in runs[b] for v in x.get("chain_done") or ()]) for b in counts}
                if done[1] and done[3]:
                    pipe = done[3] / done[1]
                    results["profiles"][name]["pipeline_ratio"] = pipe
                    print(
                        f"  pipelines (subtest start -> last group done, median of every subtest): 1 broker "
                        f"{done[1]:.2f} s, 3 brokers {done[3]:.2f} s, ratio 3/1 {pipe:.2f}",
                        flush=True,
                    )
            for b in counts:
                each_round(b, runs[b])
            if args.timeline:
                for b in counts:
                    for i, x in enumerate(runs[b]):
                        print(f"    timeline, {b} broker(s) round {i + 1} (s: " + " ".join(TIMELINE_APIS) + ")")
                        for at, c in x.get("timeline") or ():
                            print(f"      {at:6.1f} " + " ".join(f"{c[a]:6d}" for a in TIMELINE_APIS), flush=True)
            if peer[1] and peer[3] and len(counts) == 2:
                k1, k3 = _median_run(peer[1]), _median_run(peer[3])
                results["profiles"][name]["kfake"] = {
                    "1": k1,
                    "3": k3,
                    "ratio": k3["seconds"] / k1["seconds"],
                    "rounds": peer,
                }
                print(f"  kfake 1 broker:  {fmt(k1, peer[1])}{reqs(k1)}", flush=True)
                print(f"  kfake 3 brokers: {fmt(k3, peer[3])}{reqs(k3)}", flush=True)
                print(f"  kfake ratio 3/1: {k3['seconds'] / k1['seconds']:.2f}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
