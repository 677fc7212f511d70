"""Build the Go client programs of ``tests/compat/`` with Debian's Go and Debian's packaged libraries.

Debian packages Go libraries as sources under ``/usr/share/gocode/src`` (GOPATH layout:
``github.com/Shopify/sarama``, ``github.com/segmentio/kafka-go`` and their dependencies), so the
programs build offline in GOPATH mode (``GO111MODULE=off``), with no module proxy. A binary is cached
by the hash of its source, the Go version and the packaged library versions, so one test session
builds each program once (and Go's own build cache makes the next session's builds quick).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

GOPATH_DEBIAN = Path("/usr/share/gocode")
COMPAT_DIR = Path(__file__).resolve().parents[1] / "compat"
# Debian package -> the GOPATH directory it installs.
PACKAGES = {
    "golang-github-shopify-sarama-dev": "github.com/Shopify/sarama",
    "golang-github-segmentio-kafka-go-dev": "github.com/segmentio/kafka-go",
}
INSTALL_HINT = "apt-get install golang-go " + " ".join(PACKAGES) + " (.ci/run installs them)"


def missing_toolchain() -> str | None:
    """Why the Go programs cannot be built here, or None."""
    if shutil.which("go") is None:
        return "Debian's Go is not installed: " + INSTALL_HINT
    absent = [pkg for pkg, src in PACKAGES.items() if not (GOPATH_DEBIAN / "src" / src).is_dir()]
    if absent:
        return f"{', '.join(absent)} not installed: " + INSTALL_HINT
    return None


def _go_env(gopath_extra: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(GO111MODULE="off", GOPATH=f"{GOPATH_DEBIAN}:{gopath_extra}", GOFLAGS="", CGO_ENABLED="1")
    if "GOCACHE" not in env and "HOME" not in env and "XDG_CACHE_HOME" not in env:
        env["GOCACHE"] = str(gopath_extra / "cache")  # go refuses to build without a cache directory
    return env


@dataclass
class GoBuilder:
    """Builds ``tests/compat/<name>/main.go`` into ``out_dir`` once per content hash."""

    out_dir: Path

    def _key(self, name: str) -> str:
        h = hashlib.sha256()
        for f in sorted((COMPAT_DIR / name).glob("*.go")):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        h.update(subprocess.run(["go", "version"], capture_output=True, text=True, check=True).stdout.encode())
        for src in PACKAGES.values():
            h.update(str((GOPATH_DEBIAN / "src" / src).stat().st_mtime_ns).encode())
        return h.hexdigest()[:16]

    def build(self, name: str) -> Path:
        binary = self.out_dir / f"{name}-{self._key(name)}"
        if binary.exists():
            return binary
        self.out_dir.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            ["go", "build", "-o", str(binary), "."],
            cwd=COMPAT_DIR / name,
            env=_go_env(self.out_dir / "gopath"),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"go build of tests/compat/{name} failed:\n{proc.stderr[-4000:]}")
        return binary


def run_json_lines(binary: Path, *args: str, timeout: float = 60) -> list[dict[str, object]]:
    """Run a compat program; its stdout is one JSON object per line. Fails with its stderr."""
    proc = subprocess.run([str(binary), *args], capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, f"{binary.name} {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}"
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
