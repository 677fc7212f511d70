"""The house as drawn: one folder per subsystem, imports only go down the floors, no import cycles.

The imports are read with ``ast`` from the source folders (every ``import``/``from`` anywhere in a
module, lazy ones inside functions and ``TYPE_CHECKING`` ones included: a cycle hidden in a function
is still a cycle). The floors are ``shared/design.md``'s table; a folder added without a floor here
fails the test, so a new subsystem is placed on purpose.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# folder -> floor. A module may import a lower floor, or its own floor when the packages of that
# floor stay acyclic; never a higher one.
FLOORS = {
    "protocol": 1,
    "storage": 1,
    "coordinator": 2,
    "transactions": 2,
    "security": 3,
    "broker": 3,
    "ops": 4,
    "pipeline": 4,
    "groupd": 5,
}


def _package_dirs() -> dict[str, Path]:
    """``groupd.<sub>`` -> its folder, from pyproject's package-dir mapping (the one the wheel uses)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    mapping = pyproject["tool"]["setuptools"]["package-dir"]
    return {name: ROOT / folder for name, folder in mapping.items()}


def _modules() -> dict[str, Path]:
    """Every module of the distribution by its dotted name (``groupd.broker.node``)."""
    out: dict[str, Path] = {}
    for pkg, folder in _package_dirs().items():
        for path in folder.rglob("*.py"):
            rel = path.relative_to(folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([pkg, *parts])] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> Iterator[str]:
    """The distribution's modules that ``name`` imports (resolving relative imports)."""
    is_pkg = path.name == "__init__.py"
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")
                base = base if is_pkg else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # `from pkg import sub` imports the submodule when there is one
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in known else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                yield t


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    known = set(mods)
    return {m: set(_imports(m, p, known)) for m, p in mods.items()}


def _folder(module: str, dirs: dict[str, Path]) -> str:
    # the longest mapped package that holds the module names the folder
    best = max((pkg for pkg in dirs if module == pkg or module.startswith(pkg + ".")), key=len)
    return dirs[best].relative_to(ROOT).parts[0]


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_every_folder_has_a_floor_and_a_docstring() -> None:
    dirs = _package_dirs()
    folders = {p.relative_to(ROOT).parts[0] for p in dirs.values()}
    assert folders == set(FLOORS), f"folders without a floor (or floors without a folder): {folders ^ set(FLOORS)}"
    for folder in folders:
        init = ROOT / folder / "__init__.py"
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc.split()) >= 15, f"{folder}/__init__.py must say what it owns and must not know"


def test_every_subpackage_is_in_the_wheel() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(pyproject["tool"]["setuptools"]["packages"])
    packages = {m for m, p in _modules().items() if p.name == "__init__.py"}
    # A folder of data files (ops/static) is importable too: setuptools warns about any folder not listed
    # ("Package would be ignored", the first `make run`'s ~80 lines) and leaves its files out of the wheel.
    for pkg, folder in _package_dirs().items():
        for sub in folder.rglob("*"):
            if sub.is_dir() and "__pycache__" not in sub.parts and sub.name.isidentifier():
                packages.add(".".join([pkg, *sub.relative_to(folder).parts]))
    assert packages <= listed, f"packages missing from [tool.setuptools] packages: {sorted(packages - listed)}"


def test_no_module_import_cycles() -> None:
    cycles = _cycles(_graph())
    assert not cycles, "modules that import each other (pass a collaborator in instead):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_imports_only_go_down_the_floors() -> None:
    dirs = _package_dirs()
    upward = []
    for mod, targets in _graph().items():
        src = _folder(mod, dirs)
        for t in targets:
            dst = _folder(t, dirs)
            if FLOORS[dst] > FLOORS[src]:
                upward.append(f"{mod} ({src}, floor {FLOORS[src]}) imports {t} ({dst}, floor {FLOORS[dst]})")
    assert not upward, "upward imports:\n" + "\n".join(sorted(upward))


def test_folders_do_not_import_each_other() -> None:
    dirs = _package_dirs()
    folder_graph: dict[str, set[str]] = {f: set() for f in FLOORS}
    for mod, targets in _graph().items():
        src = _folder(mod, dirs)
        folder_graph[src] |= {_folder(t, dirs) for t in targets} - {src}
    assert not _cycles(folder_graph), f"subsystems that import each other: {_cycles(folder_graph)}"


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
        ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
        ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ],
)
def test_the_cycle_finder_finds_cycles(graph: dict[str, set[str]], expected: list[list[str]]) -> None:
    assert _cycles(graph) == expected


# Size limits (issue 25): a thin shard, and no file or class that has swallowed its neighbours.
SHARD = ROOT / "coordinator" / "coordinator.py"
SHARD_MAX_LINES = 300
FILE_MAX_LINES = 1_000
CLASS_MAX_LINES = 800
SIZE_LIMITED_FOLDERS = ("coordinator", "transactions", "broker")


def _size_limited_files() -> list[Path]:
    return sorted(p for folder in SIZE_LIMITED_FOLDERS for p in (ROOT / folder).rglob("*.py"))


def _line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_coordinator_shard_stays_thin() -> None:
    assert _line_count(SHARD) <= SHARD_MAX_LINES, (
        f"coordinator/coordinator.py has {_line_count(SHARD)} lines (at most {SHARD_MAX_LINES}): "
        "move the work into a manager and leave the shard its handler table and replay"
    )


def test_no_file_over_the_size_limit() -> None:
    too_long = {str(p.relative_to(ROOT)): n for p in _size_limited_files() if (n := _line_count(p)) > FILE_MAX_LINES}
    assert not too_long, f"files over {FILE_MAX_LINES} lines (split them by job): {too_long}"


def test_no_class_over_the_size_limit() -> None:
    too_long = {}
    for path in _size_limited_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > CLASS_MAX_LINES:
                    too_long[f"{path.relative_to(ROOT)}:{node.name}"] = size
    assert not too_long, f"classes over {CLASS_MAX_LINES} lines (split them by job): {too_long}"
