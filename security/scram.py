"""SASL credentials: salted SCRAM credentials, and the SASL/PLAIN message.

No password is ever stored. A user's entry holds, per SCRAM mechanism, what Kafka stores for
``kafka-configs --add-config 'SCRAM-SHA-256=[...]'``: salt, iteration count, StoredKey and ServerKey
(RFC 5802 section 3). The SCRAM exchange itself is ``scramp`` (a maintained server-side SCRAM
implementation); PLAIN passwords are checked by recomputing StoredKey from the offered password
with the user's salt and iterations, so the same entry serves PLAIN too.

``groupd scram-credential`` prints such an entry for the TOML file::

    [users."alice"]
    SCRAM-SHA-256 = { salt = "...", iterations = 4096, stored_key = "...", server_key = "..." }

Credentials also come and go at run time through AlterUserScramCredentials (``kafka-configs.sh
--alter --add-config 'SCRAM-SHA-256=[password=...]' --entity-type users --entity-name alice``, an
admin client's ``alter_user_scram_credentials``): the client sends salt, iterations and the salted
password, and the broker keeps StoredKey and ServerKey (``ScramControlManager.finishUpsertion``).
Those changes are kept in ``scram-credentials.json`` in the data directory, the same four values per
user and mechanism (and a deletion of a credential of the TOML file as a null), written atomically
before they take effect; they are laid over the TOML file's table at start-up and are in force for
the next authentication at once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

from groupd.protocol.frozen import frozen_record
from groupd.storage.files import write_atomically

_set = object.__setattr__  # what a frozen dataclass's __init__ calls per field

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
ALL_MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS, "OAUTHBEARER")
# RFC 7677 and Kafka's ScramMechanism both set 4096 as the least iteration count; Kafka's
# ScramControlManager.MAX_ITERATIONS refuses more than 16384 through AlterUserScramCredentials.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# The wire codes of Kafka's ScramMechanism (UNKNOWN = 0), in AlterUserScramCredentials and
# DescribeUserScramCredentials.
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_BY_CODE = {v: k for k, v in MECHANISM_CODES.items()}
_HASH = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class SaslError(Exception):
    """An authentication failure; ``str(e)`` goes to the client and the log, so it holds no secret."""


@frozen_record
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    def __init__(self, salt: bytes, iterations: int, stored_key: bytes, server_key: bytes) -> None:
        _set(self, "salt", salt)
        _set(self, "iterations", iterations)
        _set(self, "stored_key", stored_key)
        _set(self, "server_key", server_key)

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """The tuple ``scramp``'s ``auth_fn`` returns."""
        return self.salt, self.stored_key, self.server_key, self.iterations

    def to_json(self) -> dict[str, Any]:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return {
            "salt": b64(self.salt),
            "iterations": self.iterations,
            "stored_key": b64(self.stored_key),
            "server_key": b64(self.server_key),
        }

    def to_toml(self) -> str:
        b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
        return (
            f'{{ salt = "{b64(self.salt)}", iterations = {self.iterations}, '
            f'stored_key = "{b64(self.stored_key)}", server_key = "{b64(self.server_key)}" }}'
        )


def credential_from_salted_password(
    mechanism: str, salt: bytes, iterations: int, salted_password: bytes
) -> ScramCredential:
    """RFC 5802: StoredKey = H(HMAC(SaltedPassword, "Client Key")), ServerKey = HMAC(SaltedPassword,
    "Server Key") (``ScramFormatter.storedKey``/``serverKey``, as ScramControlManager applies them
    to an upsertion's salted password)."""
    name = _HASH[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", name).digest()
    server_key = hmac.new(salted_password, b"Server Key", name).digest()
    return ScramCredential(salt, iterations, hashlib.new(name, client_key).digest(), server_key)


def make_credential(
    mechanism: str, password: str, iterations: int = MIN_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    if mechanism not in SCRAM_MECHANISMS:
        raise ValueError(f"not a SCRAM mechanism: {mechanism}")
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"iterations must be at least {MIN_ITERATIONS}")
    if salt is not None and password.isascii() and password.isprintable():
        # SASLprep (RFC 4013) leaves printable ASCII as it is: PBKDF2 straight from hashlib, without
        # scramp's per-character SASLprep, which costs ~2 us a character (a 512 KiB PLAIN password
        # was a second of CPU).
        name = _HASH[mechanism]
        salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, iterations)
        return credential_from_salted_password(mechanism, salt, iterations, salted)
    from scramp import ScramMechanism  # here, not at the top: ~15 ms of every start without SASL

    s, stored, server, i = ScramMechanism(mechanism).make_auth_info(password, iteration_count=iterations, salt=salt)
    return ScramCredential(s, i, stored, server)


def toml_entry(user: str, credentials: dict[str, ScramCredential]) -> str:
    # json.dumps gives a TOML basic string for any user name (quotes, backslashes, non-ASCII escaped).
    lines = [f"[users.{json.dumps(user)}]"]
    lines += [f"{mech} = {cred.to_toml()}" for mech, cred in credentials.items()]
    return "\n".join(lines) + "\n"


class CredentialStore:
    """Users from the ``users`` table of the configuration file, with the changes made through
    AlterUserScramCredentials laid over it (persisted in ``scram-credentials.json`` when a data
    directory is given)."""

    FILE = "scram-credentials.json"

    def __init__(self, users: dict[str, Any], data_dir: Path | None = None) -> None:
        self._static: dict[str, dict[str, ScramCredential]] = {}
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
            self._static[user] = creds
        self.path = data_dir / self.FILE if data_dir is not None else None
        # (user, mechanism) -> credential, or None: a credential of the TOML table deleted
        self._altered: dict[tuple[str, str], ScramCredential | None] = self._load()
        self._creds = self._merge(self._altered)
        self._decoy_credential: ScramCredential | None = None

    def _load(self) -> dict[tuple[str, str], ScramCredential | None]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            data = json.loads(self.path.read_text())
            out: dict[tuple[str, str], ScramCredential | None] = {}
            for e in data["credentials"]:
                if e["mechanism"] not in SCRAM_MECHANISMS:
                    raise ValueError(f"unknown mechanism {e['mechanism']!r}")
                raw = e["credential"]
                out[(str(e["user"]), e["mechanism"])] = None if raw is None else _parse_credential(str(self.path), raw)
            return out
        except (OSError, KeyError, TypeError, ValueError) as exc:
            # a daemon must not start without the credentials it was told to keep
            raise ValueError(f"cannot read the SCRAM credentials in {self.path}: {exc}") from exc

    def _merge(self, altered: dict[tuple[str, str], ScramCredential | None]) -> dict[str, dict[str, ScramCredential]]:
        creds = {user: dict(entry) for user, entry in self._static.items()}
        for (user, mech), cred in altered.items():
            if cred is None:
                creds.get(user, {}).pop(mech, None)
            else:
                creds.setdefault(user, {})[mech] = cred
        return {user: entry for user, entry in creds.items() if entry}

    def alter(self, deletions: list[tuple[str, str]], upsertions: list[tuple[str, str, ScramCredential]]) -> None:
        """Delete and upsert credentials: persisted first (a failed write raises OSError and
        changes nothing), then in force for the next authentication."""
        altered = dict(self._altered)
        for user, mech in deletions:
            altered[(user, mech)] = None
        for user, mech, cred in upsertions:
            altered[(user, mech)] = cred
        # A deletion of what only an earlier upsertion made leaves no trace.
        altered = {k: v for k, v in altered.items() if v is not None or k[1] in self._static.get(k[0], {})}
        if self.path is not None:
            entries = [
                {"user": user, "mechanism": mech, "credential": None if cred is None else cred.to_json()}
                for (user, mech), cred in sorted(altered.items())
            ]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomically(self.path, json.dumps({"version": 1, "credentials": entries}, indent=1))
        self._altered = altered
        self._creds = self._merge(altered)

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

    def __contains__(self, user: object) -> bool:
        return user in self._creds

    def users(self) -> list[str]:
        return sorted(self._creds)

    def credentials(self, user: str) -> dict[str, ScramCredential]:
        return dict(self._creds.get(user, {}))

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
