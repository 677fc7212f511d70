"""SASL credentials: salted SCRAM credentials, and the SASL/PLAIN message.

No password is ever stored. A user's entry holds, per SCRAM mechanism, what Kafka stores for
``kafka-configs --add-config 'SCRAM-SHA-256=[...]'``: salt, iteration count, StoredKey and ServerKey
(RFC 5802 section 3). The SCRAM exchange itself is ``scramp`` (a maintained server-side SCRAM
implementation); PLAIN passwords are checked by recomputing StoredKey from the offered password
with the user's salt and iterations, so the same entry serves PLAIN too.

``groupd scram-credential`` prints such an entry for the TOML file::

    [users."alice"]
    SCRAM-SHA-256 = { salt = "...", iterations = 4096, stored_key = "...", server_key = "..." }
"""

from __future__ import annotations

import base64
import hmac
import json
from dataclasses import dataclass
from typing import Any

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ALL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
# RFC 7677 and Kafka's ScramMechanism both set 4096 as the least iteration count.
MIN_ITERATIONS = 4096


class SaslError(Exception):
    """An authentication failure; ``str(e)`` goes to the client and the log, so it holds no secret."""


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """The tuple ``scramp``'s ``auth_fn`` returns."""
        return self.salt, self.stored_key, self.server_key, self.iterations

    def to_toml(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (
            f'{{ salt = "{b64(self.salt)}", iterations = {self.iterations}, '
            f'stored_key = "{b64(self.stored_key)}", server_key = "{b64(self.server_key)}" }}'
        )


def make_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"not a SCRAM mechanism: {mechanism}")
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"iterations must be at least {MIN_ITERATIONS}")
    from scramp import ScramMechanism  # here, not at the top: ~15 ms of every start without SASL

    s, stored, server, i = ScramMechanism(mechanism).make_auth_info(password, iteration_count=iterations, salt=salt)
    return ScramCredential(s, i, stored, server)


def toml_entry(user: str, credentials: dict[str, ScramCredential]) -> str:
    # json.dumps gives a TOML basic string for any user name (quotes, backslashes, non-ASCII escaped).
    lines = [f"[users.{json.dumps(user)}]"]
    lines += [f"{mech} = {cred.to_toml()}" for mech, cred in credentials.items()]
    return "\n".join(lines) + "\n"


class CredentialStore:
    """Users from the ``users`` table of the configuration file."""

    def __init__(self, users: dict[str, Any]) -> None:
        self._creds: dict[str, dict[str, ScramCredential]] = {}
        for user, entry in users.items():
            if not isinstance(entry, dict):
                raise ValueError(f"users.{user}: expected a table of SCRAM credentials")
            creds: dict[str, ScramCredential] = {}
            for mech, raw in entry.items():
                if mech.upper() not in SCRAM_MECHANISMS:
                    raise ValueError(
                        f"users.{user}.{mech}: only salted SCRAM credentials are stored "
                        f"({', '.join(SCRAM_MECHANISMS)}); make them with `groupd scram-credential`"
                    )
                creds[mech.upper()] = _parse_credential(f"users.{user}.{mech}", raw)
            if not creds:
                raise ValueError(f"users.{user}: no credentials")
            self._creds[user] = creds
        self._decoy_credential: ScramCredential | None = None

    @property
    def _decoy(self) -> ScramCredential:
        """A fixed credential that unknown users are checked against, so that "no such user" and
        "wrong password" cost the same time; made on the first PLAIN check (4096 PBKDF2 rounds and
        scramp's import were ~20 ms of every start)."""
        if self._decoy_credential is None:
            self._decoy_credential = make_credential("SCRAM-SHA-256", "decoy", salt=b"groupd-decoy-salt")
        return self._decoy_credential

    def __len__(self) -> int:
        return len(self._creds)

    def users(self) -> list[str]:
        return sorted(self._creds)

    def scram(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._creds.get(user, {}).get(mechanism)

    def check_password(self, user: str, password: str) -> bool:
        """PLAIN: recompute StoredKey from the password with one of the user's salted credentials."""
        creds = self._creds.get(user)
        mech, cred = next(iter(creds.items())) if creds else ("SCRAM-SHA-256", self._decoy)
        try:
            again = make_credential(mech, password, cred.iterations, cred.salt)
        except Exception:  # scramp refuses passwords that SASLprep prohibits
            return False
        return hmac.compare_digest(again.stored_key, cred.stored_key) and creds is not None


def _parse_credential(where: str, raw: Any) -> ScramCredential:
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: expected {{ salt, iterations, stored_key, server_key }}")
    try:
        iterations = int(raw["iterations"])
        salt = base64.b64decode(raw["salt"], validate=True)
        stored = base64.b64decode(raw["stored_key"], validate=True)
        server = base64.b64decode(raw["server_key"], validate=True)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{where}: needs base64 salt, stored_key, server_key and an integer iterations ({e})") from e
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"{where}: iterations must be at least {MIN_ITERATIONS}")
    if not salt or not stored or len(stored) != len(server):
        raise ValueError(f"{where}: empty salt or keys of different lengths")
    return ScramCredential(salt, iterations, stored, server)


def parse_plain(token: bytes) -> tuple[str, str, str]:
    """RFC 4616: ``[authzid] NUL authcid NUL passwd``, UTF-8. Returns (authzid, user, password).

    Kafka's PlainSaslServer rules: exactly three fields, non-empty user and password, and an authzid,
    when given, must name the user itself (no acting on behalf of another principal).
    """
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslError("Authentication failed: the PLAIN message is not valid UTF-8") from None
    parts = text.split("\x00")
    if len(parts) != 3:
        raise SaslError("Invalid SASL/PLAIN response: expected 3 tokens")
    authzid, user, password = parts
    if not user:
        raise SaslError("Authentication failed: username not specified")
    if not password:
        raise SaslError("Authentication failed: password not specified")
    if authzid and authzid != user:
        raise SaslError("Authentication failed: Client requested an authorization id that is different from username")
    return authzid, user, password


# --- `groupd scram-credential` -------------------------------------------------------------------
def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "scram-credential", help="print a [users.<name>] TOML entry with salted SCRAM credentials (SASL users)"
    )
    p.add_argument("user", help="SASL user name")
    p.add_argument(
        "--mechanism",
        action="append",
        choices=list(SCRAM_MECHANISMS),
        help="repeatable (default: both); PLAIN logins are checked against the first one",
    )
    p.add_argument(
        "--iterations", type=int, default=MIN_ITERATIONS, help=f"PBKDF2 iterations (at least {MIN_ITERATIONS})"
    )
    p.add_argument("--password-stdin", action="store_true", help="read the password from standard input")


def run_cli(args: Any) -> int:
    import getpass
    import sys

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        password = getpass.getpass(f"password for {args.user}: ")
    if not password:
        print("groupd: empty password", file=sys.stderr)
        return 2
    try:
        mechanisms = args.mechanism or list(SCRAM_MECHANISMS)
        creds = {m: make_credential(m, password, args.iterations) for m in mechanisms}
    except Exception as e:  # too few iterations, or a password SASLprep prohibits
        print(f"groupd: {e}", file=sys.stderr)
        return 2
    sys.stdout.write(toml_entry(args.user, creds))
    return 0
