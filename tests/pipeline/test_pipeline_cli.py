"""``groupd analyze``: arguments, the --group/--since/--until semantics, errors. (The full run
on the fixture history is the ``analyzed`` fixture, checked by the table and report tests.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import UTC, datetime

from groupd.pipeline import TABLES, job, tables

from tests.pipeline.conftest import collect
from tests.pipeline.history import T


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat()


def test_time_arguments() -> None:
    args = job.build_parser("groupd analyze", "local[*]").parse_args(
        ["--data-dir", "d", "--out", "o", "--since", "2023-11-14T22:13:29", "--until", str(T + 16000)]
    )
    assert args.master == "local[*]"
    assert args.since == datetime.fromtimestamp((T + 9000) / 1000, tz=UTC)  # naive ISO means UTC
    assert args.until == datetime.fromtimestamp((T + 16000) / 1000, tz=UTC)
    assert job.parse_time("2023-11-14T23:13:29+01:00") == args.since


def test_time_window_keeps_what_happened_inside_it(spark, analyzed) -> None:
    written = tables.Tables(*[spark.read.parquet(str(analyzed.out / name)) for name in TABLES])
    since = datetime.fromtimestamp((T + 9000) / 1000, tz=UTC)
    until = datetime.fromtimestamp((T + 16000) / 1000, tz=UTC)
    w = tables.within(written, since, until)
    # generations overlapping [T+9s, T+16s): billing g2 (ends T+10s), g3, g4; audit's and
    # connect-cluster's single generations never end
    assert [(g["group"], g["generation"]) for g in collect(w.generations, "group", "seq")] == [
        ("audit", 1),
        ("billing", 2),
        ("billing", 3),
        ("billing", 4),
        ("connect-cluster", 1),
    ]
    assert [r["to_generation"] for r in collect(w.rebalances, "seq")] == [3, 4]
    assert [(c["partition"], c["offset"]) for c in collect(w.offset_commits, "log_offset")] == [(0, 15), (2, 9)]
    assert [(a["kind"], a["group"]) for a in collect(w.anomalies, "kind")] == [
        ("backwards_commit", "billing"),
        ("double_assigned", "billing"),
        ("unassigned", "billing"),
    ]


def _groupd(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "groupd", *args], capture_output=True, text=True, timeout=120)


def test_help_and_argument_errors() -> None:
    top = _groupd("--help")
    assert top.returncode == 0 and "analyze" in top.stdout
    helped = _groupd("analyze", "--help")
    assert helped.returncode == 0
    for flag in ("--data-dir", "--out", "--master", "--group", "--since", "--until"):
        assert flag in helped.stdout
    missing = _groupd("analyze", "--data-dir", "/nonexistent/groupd-data", "--out", "/tmp/x")
    assert missing.returncode == 1 and "no such data directory" in missing.stderr
    bad = _groupd("analyze", "--data-dir", ".", "--out", "/tmp/x", "--since", "yesterday")
    assert bad.returncode == 2 and "not a time" in bad.stderr
    backwards = _groupd(
        "analyze", "--data-dir", ".", "--out", "/tmp/x", "--since", "2024-01-02", "--until", "2024-01-01"
    )
    assert backwards.returncode == 2


def test_a_fresh_data_directory_gives_empty_tables_and_a_report(spark, tmp_path, capsys) -> None:
    from groupd import cli

    data = tmp_path / "data"
    data.mkdir()  # a groupd that never stored anything
    out = tmp_path / "out"
    assert cli.main(["analyze", "--data-dir", str(data), "--out", str(out), "--master", "local[2]"]) == 0
    assert "analyzed 0 records" in capsys.readouterr().out
    for name in TABLES:
        assert spark.read.parquet(str(out / name)).count() == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert page.count('<img class="plot"') == 5 and "Anomalies (0)" in page


def test_progress_goes_to_stderr_phase_by_phase_with_running_stages(analyzed) -> None:
    # every phase says so as it starts, in order; the status tracker adds the running stages
    phases = ["starting Spark", "shuffle partitions", "reading and decoding", "decoded 21 records"]
    phases += [f"writing {name}" for name in TABLES] + ["rendering the report"]
    positions = [analyzed.stderr.find(p) for p in phases]
    assert -1 not in positions and positions == sorted(positions), analyzed.stderr
    assert re.search(r"stage \d+ \(\w+\): \d+/\d+ tasks done, \d+ running", analyzed.stderr), analyzed.stderr
    assert "stage" not in analyzed.stdout  # stdout keeps the summary only


def test_shuffle_partitions_follow_the_input() -> None:
    # At least two per core (every core has work), then one per 16 MiB of log: never Spark's fixed
    # 200, which made a small log's every shuffle 200 tasks on a cluster (issue 29).
    mib = 1 << 20
    assert job.shuffle_partitions(None, 2) == job.shuffle_partitions(0, 2) == 4
    assert job.shuffle_partitions(300 * 1024, 2) == 4  # a small log
    assert job.shuffle_partitions(300 * 1024, 8) == 16
    assert job.shuffle_partitions(100 * mib, 2) == 7
    assert job.shuffle_partitions(10_000 * mib, 2) == 625
    sizes = [job.shuffle_partitions(n * mib, 2) for n in range(0, 2000, 50)]
    assert sizes == sorted(sizes) and sizes[-1] > 100  # grows with the input


def test_an_explicit_shuffle_setting_is_kept(spark, history) -> None:
    # the test session sets spark.sql.shuffle.partitions=2 (tests/pipeline/conftest.py), as --conf would
    assert job.size_shuffles(spark, str(history.data_dir)) == (2, "set explicitly")
    assert spark.conf.get(job.SHUFFLE_PARTITIONS) == "2"


def _without_java(tmp_path, **env: str) -> subprocess.CompletedProcess:
    # the interpreter by absolute path, nothing else reachable: no java on PATH
    clean = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "PATH")}
    clean.update(env)
    return subprocess.run(
        [sys.executable, "-m", "groupd", "analyze", "--data-dir", str(tmp_path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean,
    )


def test_analyze_without_java_says_what_is_missing(tmp_path) -> None:
    no_path = _without_java(tmp_path, PATH=str(tmp_path / "nowhere"))
    assert no_path.returncode == 3
    assert "no java on PATH" in no_path.stderr and "Java 17 or later" in no_path.stderr
    assert "Traceback" not in no_path.stderr and "JAVA_GATEWAY_EXITED" not in no_path.stderr

    bad_home = _without_java(tmp_path, PATH=str(tmp_path / "nowhere"), JAVA_HOME=str(tmp_path / "jdk"))
    assert bad_home.returncode == 3 and f"JAVA_HOME={tmp_path / 'jdk'} has no bin/java" in bad_home.stderr

    # a Java 11 (what `java -version` prints on stderr) is refused before Spark tries it
    old = tmp_path / "jdk11" / "bin"
    old.mkdir(parents=True)
    (old / "java").write_text("#!/bin/sh\necho 'openjdk version \"11.0.22\" 2024-01-16' >&2\n")
    (old / "java").chmod(0o755)
    too_old = _without_java(tmp_path, PATH=str(tmp_path / "nowhere"), JAVA_HOME=str(tmp_path / "jdk11"))
    assert too_old.returncode == 3 and "is Java 11" in too_old.stderr, too_old.stderr
    assert "Traceback" not in too_old.stderr


def test_java_version_parsing() -> None:
    from groupd.pipeline import progress

    assert progress.java_problem() is None  # this machine runs the Spark tests: its Java is fine
    exe = progress.java_executable()
    assert exe is not None and progress.java_version(exe) >= progress.JAVA_MIN
