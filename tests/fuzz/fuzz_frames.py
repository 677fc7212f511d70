"""Coverage-guided fuzzing of framing, decoding and the request handlers with atheris (libFuzzer).

    python -m tests.fuzz.fuzz_frames -runs=1000000 -max_len=4096 [corpus_dir ...]

Without a corpus directory the seed corpus (``harness.seed_corpus``: valid requests of every routed
API and version, in each input mode) is written to a temporary one first. libFuzzer's flags work as
usual (``-max_total_time``, ``-timeout``, ``-rss_limit_mb``, ``-print_final_stats=1``). A crash is a
``FuzzCrash`` raised by the harness (see ``harness.py``); libFuzzer writes the input to
``crash-<sha1>``; replay it with ``python -m tests.fuzz.fuzz_frames crash-<sha1>``.
libFuzzer ends the process without running ``atexit`` handlers, so the broker's last data directory
(``/dev/shm/groupd-fuzz-*``) outlives a campaign: remove it afterwards.

atheris is not a dependency of ``make test``: the short deterministic run in ``test_fuzz_short.py``
uses the same harness with seeded byte mutations.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> None:
    import atheris

    with atheris.instrument_imports(include=["groupd"]):
        from groupd import daemon  # noqa: F401  (instrument the daemon's own modules)
        from tests.fuzz import harness

    target = harness.FuzzTarget()
    args = list(argv)
    if not any(not a.startswith("-") for a in args[1:]):
        corpus = Path(tempfile.mkdtemp(prefix="groupd-fuzz-corpus-"))
        for i, seed in enumerate(harness.seed_corpus(harness.ROUTED_KEYS)):
            (corpus / f"seed-{i:05d}").write_bytes(seed)
        args.append(str(corpus))

    def test_one_input(data: bytes) -> None:
        target.one_input(data)

    atheris.Setup(args, test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
