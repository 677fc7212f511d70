"""The short, deterministic fuzz run of ``make test``: the in-process harness (framing, header and
body decoding for every routed API and version, the real handlers on a real broker) over the seed
corpus and a fixed number of seeded byte-level mutations of it.

The long coverage-guided campaign is ``python -m tests.fuzz.fuzz_frames -runs=1000000`` (atheris).
"""

from __future__ import annotations

import random

from tests.fuzz.harness import ROUTED_KEYS, FuzzCrash, FuzzTarget, decode_input, mutate, seed_corpus

MUTATIONS = 25_000


def test_seed_corpus_and_mutations_never_crash_the_broker(target: FuzzTarget) -> None:
    seeds = list(seed_corpus(ROUTED_KEYS))
    assert len(seeds) > 500  # every routed API and version, in each input mode
    rng = random.Random(20240611)
    inputs = seeds + [mutate(rng.choice(seeds), rng) for _ in range(MUTATIONS)]
    crashes: list[str] = []
    for data in inputs:
        try:
            target.one_input(data)
        except FuzzCrash as e:
            crashes.append(f"{data.hex()}: {e}")
    assert not crashes, "\n".join(crashes[:5])


def test_seeds_reach_the_handlers(target: FuzzTarget) -> None:
    """The harness is only worth something if valid seeds get answers, not closes."""
    answered = 0
    seeds = [s for s in seed_corpus(ROUTED_KEYS) if s[0] == 1]
    for data in seeds:
        stream, chunks = decode_input(data, ROUTED_KEYS)
        conn = target.feed(stream, chunks)
        answered += bool(conn.transport.written)  # type: ignore[union-attr]
        if not conn.closed:
            conn.close("done")
    assert answered >= 0.9 * len(seeds)
