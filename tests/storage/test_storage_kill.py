"""kill -9 a process in the middle of group-committed appends; every acknowledged record survives."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from groupd.storage.log import PartitionLog
from storage_helpers import small_config

CHILD = textwrap.dedent(
    """
    import asyncio, sys
    sys.path.insert(0, {here!r})
    import conftest  # makes groupd.storage importable from a bare checkout
    from groupd.storage import Appender, LogConfig, PartitionLog

    async def main():
        cfg = LogConfig(segment_bytes=3000, index_interval_bytes=200, segment_ms=None)
        plog = PartitionLog.open({path!r}, cfg)
        appender = Appender("never")

        async def writer(w):
            i = 0
            while True:
                value = b"w%d-%d" % (w, i)
                base, _ = await appender.append(plog, [(b"key-%d" % w, value, [], i)])
                # An acknowledgement is only printed after the append returned.
                sys.stdout.write("%d %s\\n" % (base, value.decode()))
                sys.stdout.flush()
                i += 1

        await asyncio.gather(*(writer(w) for w in range(8)))

    asyncio.run(main())
    """
)


def run_and_kill(path: Path, acks_before_kill: int) -> dict[int, bytes]:
    code = CHILD.format(here=str(Path(__file__).parent), path=str(path))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    acked: dict[int, bytes] = {}
    assert proc.stdout is not None
    try:
        while len(acked) < acks_before_kill:
            line = proc.stdout.readline()
            assert line, proc.stderr.read().decode() if proc.stderr else "child died"
            off, value = line.split()
            acked[int(off)] = value
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        if proc.stderr:
            proc.stderr.close()
    return acked


def test_sigkill_during_appends_loses_no_acknowledged_record(tmp_path):
    for trial, n in enumerate((150, 400, 900)):
        path = tmp_path / f"t-{trial}"
        acked = run_and_kill(path, n)
        plog = PartitionLog.open(path, small_config(segment_bytes=3000, index_interval_bytes=200))
        got = {off: value for off, _ts, _key, value in plog.iter_records()}
        for off, value in acked.items():
            assert got.get(off) == value, off
        assert sorted(got) == list(range(plog.log_end_offset))  # no holes, nothing duplicated
        plog.validate_all()
        plog.append_records([(b"after", b"restart", [], 0)])
        plog.close()
