"""What a newcomer's first ``make run`` (``pip install -e .``) and ``make wheel`` build from the source
folders: no setuptools warning ("Package would be ignored" was ~80 lines of the first ``make run``), and
a wheel holding every file of every folder mapped into ``groupd.*`` -- the modules and the data folders
(the dashboard's ``ops/static``, the control endpoint's ``ops/openapi``) alike.

The builds run on a copy of the sources (a build writes ``build/`` and ``*.egg-info`` next to them) with
setuptools from the package index, in an isolated build environment, as pip and ``python -m build`` do.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGE_DIR: dict[str, str] = PYPROJECT["tool"]["setuptools"]["package-dir"]

# What setuptools says when its configuration and the folders disagree (BuildBackendWarning is how
# pip >= 25 relays a backend's warnings; `python -m build` prints them as "WARNING ...").
SETUPTOOLS_COMPLAINT = re.compile(r"would be ignored|absent from the `packages`|BuildBackendWarning|SetuptoolsWarning")
# setuptools' note on every build that `[tool.setuptools.ext-modules]` is "experimental": the table is
# how its documentation declares extensions in pyproject.toml (storage/_native.c), not a mistake of ours
EXT_MODULES_NOTE = re.compile(r"`\[tool\.setuptools\.ext-modules\]` in `pyproject\.toml` is still \*experimental\*")

pytestmark = pytest.mark.e2e


def _source_files() -> set[str]:
    """Every file the wheel must carry, by its path in the wheel (``groupd/ops/static/index.html``)."""
    out: set[str] = set()
    for pkg, folder in PACKAGE_DIR.items():
        base = ROOT / folder
        for path in base.rglob("*"):
            rel = path.relative_to(base)
            # a folder's README.md is read where the sources are, not from an install
            # a C extension built in place by an editable install is checked apart (see the wheel test)
            if path.is_dir() or "__pycache__" in rel.parts or path.suffix in (".pyc", ".md", ".so"):
                continue
            # a sub-folder mapped on its own is counted under its own name
            if any(
                other != pkg and other.startswith(pkg + ".") and (ROOT / PACKAGE_DIR[other]) in path.parents
                for other in PACKAGE_DIR
            ):
                continue
            out.add("/".join([*pkg.split("."), *rel.parts]))
    return out


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for folder in set(PACKAGE_DIR.values()):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    return src


def _run(cmd: list[str], cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONWARNINGS")}
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    return out


def test_the_wheel_builds_without_warnings_and_carries_every_file(source_copy: Path, tmp_path: Path) -> None:
    out = _run([sys.executable, "-m", "build", "--wheel", "--outdir", str(tmp_path), "."], source_copy)
    complaints = [
        line for line in out.splitlines() if SETUPTOOLS_COMPLAINT.search(line) and not EXT_MODULES_NOTE.search(line)
    ]
    assert not complaints, "\n".join(complaints)
    (wheel,) = tmp_path.glob("groupd-*.whl")
    names = {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}
    # the C extensions declared in pyproject.toml are built into the wheel (they are optional: a
    # machine without a compiler would build one without them; this one has gcc)
    for ext in PYPROJECT["tool"]["setuptools"].get("ext-modules", []):
        built = [n for n in names if re.fullmatch(re.escape(ext["name"].replace(".", "/")) + r"\..*\.so", n)]
        assert built, f"{ext['name']} is not in the wheel"
        names -= set(built)
    expected = _source_files()
    assert {"groupd/ops/static/index.html", "groupd/ops/openapi/control.json", "groupd/cli.py"} <= expected
    assert names == expected, f"missing: {sorted(expected - names)}; unexpected: {sorted(names - expected)}"


def test_an_editable_install_prints_no_setuptools_warning(source_copy: Path, tmp_path: Path) -> None:
    # The Makefile's install (`pip install -q -e .` with its QUIET_EDITABLE), this pip, a fresh
    # environment; --no-deps: the dependencies are not what is checked here.
    make = (ROOT / "Makefile").read_text()
    assert "\t$(QUIET_EDITABLE) $(PIP) install -q -e .\n" in make
    ((_q, quiet),) = re.findall(r"""^QUIET_EDITABLE := PYTHONWARNINGS=(["'])(.*)\1$""", make, re.M)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps"]
    out = _run(["env", f"PYTHONWARNINGS={quiet}", *pip, "-e", "."], source_copy)
    assert not out.strip(), out  # not a line (pip's notes on this machine's extra indexes aside)
    # and the install serves the data folders from the sources (groupd.ops imports nothing)
    probe = (
        "from importlib import resources as r; ops = r.files('groupd.ops');"
        "assert ops.joinpath('static', 'index.html').read_bytes(); assert ops.joinpath('openapi', 'control.json').read_bytes()"
    )
    subprocess.run([str(venv / "bin" / "python"), "-c", probe], check=True, cwd=tmp_path, timeout=60)
