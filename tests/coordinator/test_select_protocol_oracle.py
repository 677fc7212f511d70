"""ClassicGroup.select_protocol against Kafka's own algorithm run on a JVM.

Kafka's ``ClassicGroup.selectProtocol`` counts votes in a ``java.util.HashMap`` (members voting in the
iteration order of the group's ``HashMap`` of members) and keeps the first of equal maxima
(``stream().max``). The Java below is that method's logic over the same data structures; random
groups (joins, leaves, colliding protocol names) must elect the same protocol in both. Needs a JDK
(``javac``), which this machine has; elsewhere the test is skipped.
"""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest
from groupd.coordinator.classic.group import ClassicGroup, GroupState, Member

ORACLE = r"""
import java.io.*;
import java.util.*;
import java.util.stream.*;

public class SelectProtocol {
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, "UTF-8"));
        String line;
        while ((line = in.readLine()) != null) {
            Map<String, List<String>> members = new HashMap<>();
            Map<String, Integer> supported = new HashMap<>();
            for (String op : line.split(" ")) {
                if (op.startsWith("-")) {
                    for (String p : members.remove(op.substring(1))) supported.put(p, supported.get(p) - 1);
                } else {
                    String[] kv = op.substring(1).split("=");
                    List<String> ps = Arrays.asList(kv[1].split(","));
                    members.put(kv[0], ps);
                    for (String p : ps) supported.put(p, supported.getOrDefault(p, 0) + 1);
                }
            }
            Set<String> candidates = supported.entrySet().stream()
                .filter(e -> e.getValue() == members.size()).map(Map.Entry::getKey).collect(Collectors.toSet());
            Map<String, Integer> votes = new HashMap<>();
            members.values().stream()
                .map(ps -> ps.stream().filter(candidates::contains).findFirst().get())
                .forEach(p -> votes.put(p, votes.getOrDefault(p, 0) + 1));
            System.out.println(votes.entrySet().stream()
                .max(Comparator.comparingInt(Map.Entry::getValue)).map(Map.Entry::getKey).get());
        }
    }
}
"""

# "Aa"/"BB" share a hash code; "a"/"q" and "range"/"b" share small buckets.
NAMES = ["range", "roundrobin", "sticky", "cooperative-sticky", "a", "q", "Aa", "BB", "b"]


def _scenarios(rng: random.Random, n: int) -> list[list[tuple[str, str, list[str]]]]:
    out = []
    for _ in range(n):
        names = rng.sample(NAMES, rng.randint(2, 4))
        joined = rng.randint(2, 30)
        ops: list[tuple[str, str, list[str]]] = []
        ids = []
        for i in range(joined):
            mid = f"{rng.choice(['c', 'consumer', 'app-x'])}-{rng.getrandbits(40):010x}-{i}"
            ids.append(mid)
            ops.append(("+", mid, rng.sample(names, len(names))))
        for mid in rng.sample(ids, rng.randint(0, joined - 1)):
            ops.append(("-", mid, []))
        out.append(ops)
    return out


def _groupd(ops: list[tuple[str, str, list[str]]]) -> str:
    g = ClassicGroup("g", GroupState.EMPTY, 0)
    for op, mid, prefs in ops:
        if op == "+":
            g.add(Member(mid, None, "c", "/h", 30000, 10000, "consumer", [(p, b"") for p in prefs]), None)
        else:
            g.remove(mid)
    return g.select_protocol()


def test_select_protocol_agrees_with_kafkas_hashmap_algorithm(tmp_path: Path) -> None:
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        pytest.skip("no JDK to run Kafka's algorithm")
    (tmp_path / "SelectProtocol.java").write_text(ORACLE)
    subprocess.run([javac, "SelectProtocol.java"], cwd=tmp_path, check=True, timeout=60)
    scenarios = _scenarios(random.Random(16), 400)
    lines = [
        " ".join(f"{op}{mid}" + (f"={','.join(prefs)}" if op == "+" else "") for op, mid, prefs in s) for s in scenarios
    ]
    done = subprocess.run(
        [java, "-cp", str(tmp_path), "SelectProtocol"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    kafka = done.stdout.splitlines()
    ours = [_groupd(s) for s in scenarios]
    assert len(kafka) == len(ours)
    mismatches = [(i, k, o) for i, (k, o) in enumerate(zip(kafka, ours, strict=True)) if k != o]
    assert not mismatches, mismatches[:5]
