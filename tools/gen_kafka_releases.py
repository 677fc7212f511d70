"""Generate ``protocol/kafka_releases_data.py``: per Apache Kafka release, the API versions a broker
listener accepts and advertises, read from that release's message specs.

Usage (the specs come from a git checkout carrying Apache's release tags, e.g. the ``aiven/inkless``
mirror)::

    python tools/gen_kafka_releases.py --repo /path/to/kafka.git > protocol/kafka_releases_data.py

For every ``clients/src/main/resources/common/message/*Request.json`` of a release tag:

- only APIs whose ``listeners`` include ``broker`` (a KRaft broker's client listener:
  ``ApiKeys.apisForListener(BROKER)``);
- ``validVersions`` is the accepted range (``ApiKeys.oldestVersion`` .. ``latestVersion``); with
  ``latestVersionUnstable`` the last version is left out, as ``unstable.api.versions.enable=false``
  (the default) does (``ApiKeys.latestVersion(false)``); an API left without a version is not exposed
  (``ApiKeys.toApiVersion`` returns empty);
- the advertised range is the accepted one except Produce on a broker listener from 4.0 on, which
  advertises min version 0 while refusing v0-2 (KAFKA-18659:
  ``ApiKeys.PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION``, ``ApiKeys.toApiVersionForApiResponse``).
  The generator reads that constant from the release's ``ApiKeys.java``;
- GetTelemetrySubscriptions and PushTelemetry are left out of ApiVersions unless a telemetry receiver
  is configured (``ApiVersionsResponse.filterApis``); they are kept in the table, flagged.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys

RELEASES = {"3.9": "3.9.1", "4.0": "4.0.1", "4.1": "4.1.1", "4.2": "4.2.0-rc1"}
SPEC_DIR = "clients/src/main/resources/common/message/"
API_KEYS_JAVA = "clients/src/main/java/org/apache/kafka/common/protocol/ApiKeys.java"
TELEMETRY = {"GetTelemetrySubscriptions", "PushTelemetry"}


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout


def strip_comments(text: str) -> str:
    """The specs are JSON with ``//`` line comments; strings may hold ``//`` (URLs)."""
    out: list[str] = []
    i, n, in_str = 0, len(text), False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_str = False
        elif c == '"':
            in_str = True
            out.append(c)
        elif text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def parse_range(valid: str) -> tuple[int, int]:
    lo, _, hi = valid.partition("-")
    return int(lo), int(hi or lo)


def _read_blobs(repo: str, revs: list[str]) -> list[str]:
    """The contents of ``revs`` (``TAG:path``) in one ``git cat-file --batch`` (one ``git show`` each
    took half a minute for the four releases)."""
    out = subprocess.run(
        ["git", "-C", repo, "cat-file", "--batch"],
        input="".join(f"{r}\n" for r in revs).encode(),
        check=True,
        capture_output=True,
    ).stdout
    blobs: list[str] = []
    pos = 0
    for rev in revs:
        header_end = out.index(b"\n", pos)
        header = out[pos:header_end].split()
        if len(header) != 3:
            raise RuntimeError(f"{rev}: {out[pos:header_end].decode()}")
        size = int(header[2])
        blobs.append(out[header_end + 1 : header_end + 1 + size].decode())
        pos = header_end + 1 + size + 1  # the blob, then a newline
    return blobs


def release_table(repo: str, tag: str) -> dict[int, tuple[str, int, int, int, int, bool]]:
    """api_key -> (name, accepted min, accepted max, advertised min, advertised max, telemetry)."""
    names = [p for p in _git(repo, "ls-tree", "--name-only", f"{tag}:{SPEC_DIR}").split() if p.endswith("Request.json")]
    api_keys_java, *specs = _read_blobs(repo, [f"{tag}:{API_KEYS_JAVA}"] + [f"{tag}:{SPEC_DIR}{n}" for n in names])
    m = re.search(r"PRODUCE_API_VERSIONS_RESPONSE_MIN_VERSION\s*=\s*(\d+)", api_keys_java)
    produce_advertised_min = int(m.group(1)) if m else None
    out: dict[int, tuple[str, int, int, int, int, bool]] = {}
    for text in specs:
        spec = json.loads(strip_comments(text))
        if spec.get("type") != "request" or "broker" not in spec.get("listeners", []):
            continue
        lo, hi = parse_range(spec["validVersions"])
        if spec.get("latestVersionUnstable"):
            hi -= 1
        if hi < lo:
            continue
        name = spec["name"].removesuffix("Request")
        adv_lo = lo
        if name == "Produce" and produce_advertised_min is not None:
            adv_lo = produce_advertised_min
        out[spec["apiKey"]] = (name, lo, hi, adv_lo, hi, name in TELEMETRY)
    return dict(sorted(out.items()))


def _lit(v: object) -> str:
    """A Python literal as ruff format writes it (double quotes)."""
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(_lit(x) for x in v) + ")"
    return repr(v)


def render(tables: dict[str, tuple[str, dict[int, tuple[str, int, int, int, int, bool]]]]) -> str:
    lines = [
        '"""GENERATED by tools/gen_kafka_releases.py from each release\'s message specs: do not edit.',
        "",
        "RELEASE_TAGS: the git tag read per release. API_RANGES: release -> api key -> (name, accepted min,",
        "accepted max, advertised min, advertised max, telemetry-only) for a KRaft broker listener with",
        "unstable API versions disabled (see the generator's docstring for the rules).",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "RELEASE_TAGS: dict[str, str] = {",
    ]
    lines += [f"    {_lit(rel)}: {_lit(tag)}," for rel, (tag, _t) in tables.items()]
    lines += ["}", "", "API_RANGES: dict[str, dict[int, tuple[str, int, int, int, int, bool]]] = {"]
    for rel, (_tag, table) in tables.items():
        lines.append(f"    {_lit(rel)}: {{")
        lines += [f"        {k}: {_lit(v)}," for k, v in table.items()]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repo", required=True, help="git directory holding Apache Kafka's release tags")
    args = p.parse_args()
    tables = {rel: (tag, release_table(args.repo, tag)) for rel, tag in RELEASES.items()}
    sys.stdout.write(render(tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
