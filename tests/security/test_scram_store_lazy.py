"""Start-up: a daemon without SASL users never loads scramp nor derives the decoy credential."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from groupd.security.scram import CredentialStore


def test_a_broker_without_sasl_does_not_import_scramp(tmp_path: Path) -> None:
    # scramp (and asn1crypto under it) and the decoy's 4096 PBKDF2 rounds were ~20 ms of every start.
    code = (
        "import sys\n"
        "from groupd.broker.node import Broker\n"
        "from groupd.config import Config\n"
        f"Broker(Config(data_dir={str(tmp_path)!r}, port=0))\n"
        "print('scramp' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip().splitlines()[-1] == "False"


def test_unknown_users_are_still_checked_against_the_decoy() -> None:
    store = CredentialStore({})
    assert store._decoy_credential is None
    assert store.check_password("nobody", "secret") is False
    assert store._decoy_credential is not None
