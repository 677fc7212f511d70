"""A small synchronous Kafka admin client on groupd's own codec.

It speaks to any broker (groupd or a real Kafka cluster): ApiVersions on every connection picks the
highest version both sides know, Metadata finds brokers and partition leaders, FindCoordinator
finds a group's coordinator. The administrative calls (ListGroups, DescribeGroups, OffsetFetch,
ListOffsets, OffsetCommit, OffsetDelete, DeleteGroups, CreateTopics, DeleteTopics,
CreatePartitions) are what ``groupd groups|offsets|topics ...`` and ``groupd healthcheck`` are
built from.

Security is a Kafka client's: ``security.protocol`` PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL; TLS
through Python's ``ssl``; SASL PLAIN and SCRAM-SHA-256/512 (``scramp``'s client) over SaslHandshake
v1 + SaslAuthenticate, the order Kafka's own clients use (ApiVersions first, then the handshake).
``Security.from_properties`` reads Kafka's client properties files (``--command-config``).

Blocking sockets rather than asyncio: a command line tool makes a handful of requests one after
another, and a plain socket with a timeout keeps every failure a single, explainable exception.
"""

from __future__ import annotations

import re
import socket
import ssl
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import scramp
from groupd.coordinator.consumer_protocol import ConsumerProtocolError, decode_assignment
from groupd.protocol._rt import DecodeError
from groupd.protocol.errors import ErrorCode
from groupd.protocol.messages import API_BY_NAME
from groupd.protocol.messages.headers import REQUEST_HEADER, RESPONSE_HEADER
from groupd.protocol.schema import ApiSchema

EARLIEST_TIMESTAMP = -2  # ListOffsets: Kafka's ListOffsetsRequest.EARLIEST_TIMESTAMP
LATEST_TIMESTAMP = -1  # ListOffsets: LATEST_TIMESTAMP (the log end offset)

_MAX_RESPONSE_BYTES = 256 * 1024 * 1024
# A coordinator that is loading its partitions, or that moved, is asked again until the deadline.
_RETRIABLE = {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.LEADER_NOT_AVAILABLE,
}

TopicPartition = tuple[str, int]
# API keys of requests our codec does not have yet, so support can still be read from ApiVersions.
_KNOWN_API_KEYS = {"DescribeConfigs": 32, "AlterConfigs": 33, "IncrementalAlterConfigs": 44}
T = TypeVar("T")


# ConfigResource.Type.TOPIC, AlterConfigOp.OpType SET/DELETE, ConfigSource.DYNAMIC_TOPIC_CONFIG
_TOPIC_RESOURCE = 2
_OP_SET, _OP_DELETE = 0, 1
DYNAMIC_TOPIC_CONFIG = 1


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"ERROR_{code}"


class KafkaClientError(Exception):
    """Everything this client raises; ``str()`` is a one-line explanation for a person."""


class BrokerUnreachable(KafkaClientError):
    """The broker refused the connection, did not answer in time, or hung up."""


class KafkaError(KafkaClientError):
    """The broker answered with an error code."""

    def __init__(self, api: str, code: int, message: str | None = None) -> None:
        self.api = api
        self.code = code
        self.name = error_name(code)
        super().__init__(f"{api} failed: {self.name}" + (f" ({message})" if message else ""))


class AuthenticationFailed(KafkaClientError):
    """TLS or SASL did not let us in; ``name`` is the Kafka error name (or a made-up one for TLS)."""

    def __init__(self, message: str, name: str = "SASL_AUTHENTICATION_FAILED") -> None:
        self.name = name
        super().__init__(message)


# --- security ------------------------------------------------------------------------------------

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_MODULES = {
    "org.apache.kafka.common.security.plain.PlainLoginModule",
    "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Settings of Kafka's Java clients and librdkafka that change nothing for this client (passwords of
# JKS stores, algorithms the ssl module picks itself): accepted silently.
_IGNORED_SECURITY_KEYS = {
    "ssl.truststore.password",
    "ssl.keystore.password",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
}


@dataclass(frozen=True)
class Security:
    """How to reach a broker: Kafka's ``security.protocol`` and the ``ssl.*`` / ``sasl.*`` it needs."""

    protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_cadata: str | None = None  # Kafka's ssl.truststore.certificates (PEM text)
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_key_password: str | None = None
    ssl_check_hostname: bool = True  # Kafka's ssl.endpoint.identification.algorithm=https (its default)
    sasl_mechanism: str = "PLAIN"  # Kafka's default is GSSAPI, which this client does not speak
    sasl_username: str | None = None
    sasl_password: str | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    def validate(self) -> Security:
        """Raise ValueError on settings that cannot work, before any connection is made."""
        if self.protocol not in SECURITY_PROTOCOLS:
            raise ValueError(f"unknown security protocol {self.protocol!r} (one of {', '.join(SECURITY_PROTOCOLS)})")
        if self.sasl:
            if self.sasl_mechanism not in SASL_MECHANISMS:
                raise ValueError(
                    f"SASL mechanism {self.sasl_mechanism!r} is not supported by this client "
                    f"(one of {', '.join(SASL_MECHANISMS)})"
                )
            if not self.sasl_username or self.sasl_password is None:
                raise ValueError(f"{self.protocol} needs a SASL user name and password")
        if self.ssl_keyfile and not self.ssl_certfile:
            raise ValueError("an SSL key needs its certificate (ssl.certificate.location / --ssl-certfile)")
        return self

    def ssl_context(self) -> ssl.SSLContext:
        try:
            ctx = ssl.create_default_context(cafile=self.ssl_cafile, cadata=self.ssl_cadata)
            ctx.check_hostname = self.ssl_check_hostname
            if self.ssl_certfile:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile, password=self.ssl_key_password)
        except (OSError, ssl.SSLError) as e:
            raise ValueError(f"cannot load the TLS files: {e}") from None
        return ctx

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
        """Keyword arguments for ``Security`` from a Kafka client properties file's entries (Java
        client names and librdkafka names), and warnings for security settings this client ignores.
        Raises ValueError for settings it cannot honour (a JKS truststore, a GSSAPI login)."""
        out: dict[str, Any] = {}
        warnings: list[str] = []
        for key, value in props.items():
            if key == "security.protocol":
                out["protocol"] = value.strip().upper()
            elif key in ("ssl.ca.location", "ssl.cafile"):
                out["ssl_cafile"] = value
            elif key == "ssl.truststore.location":
                out["ssl_cafile"] = _pem_store(key, value, props.get("ssl.truststore.type"))
            elif key == "ssl.truststore.certificates":
                out["ssl_cadata"] = value
            elif key in ("ssl.certificate.location", "ssl.certfile"):
                out["ssl_certfile"] = value
            elif key in ("ssl.key.location", "ssl.keyfile"):
                out["ssl_keyfile"] = value
            elif key == "ssl.keystore.location":
                # A PEM keystore holds the key and the certificate chain in one file.
                out["ssl_certfile"] = _pem_store(key, value, props.get("ssl.keystore.type"))
            elif key == "ssl.key.password":
                out["ssl_key_password"] = value
            elif key == "ssl.endpoint.identification.algorithm":
                out["ssl_check_hostname"] = value.strip().lower() == "https"
            elif key == "enable.ssl.certificate.verification":  # librdkafka
                if value.strip().lower() == "false":
                    raise ValueError(f"{key}=false is not supported: give the CA (ssl.ca.location) instead")
            elif key == "sasl.mechanism" or key == "sasl.mechanisms":  # Java / librdkafka
                out["sasl_mechanism"] = value.strip().upper()
            elif key == "sasl.username":
                out["sasl_username"] = value
            elif key == "sasl.password":
                out["sasl_password"] = value
            elif key == "sasl.jaas.config":
                out["sasl_username"], out["sasl_password"] = parse_jaas_config(value)
            elif key.endswith(".type") and key.startswith("ssl."):
                continue  # read with its location above
            elif key.startswith(("ssl.", "sasl.")) and key not in _IGNORED_SECURITY_KEYS:
                warnings.append(f"ignoring {key}: not supported by this client")
        return out, warnings


def _pem_store(key: str, path: str, store_type: str | None) -> str:
    """Kafka's trust/key stores are JKS or PKCS12 unless ``*.type=PEM``; only PEM can be read here."""
    kind = (store_type or "").strip().upper()
    if kind == "PEM":
        return path
    if not kind:
        try:
            with open(path, "rb") as fh:
                if fh.read(64).lstrip().startswith(b"-----BEGIN"):
                    return path
        except OSError as e:
            raise ValueError(f"{key}: cannot read {path}: {e.strerror or e}") from None
    raise ValueError(
        f"{key}: only PEM stores are supported ({key.rsplit('.', 1)[0]}.type=PEM), not {kind or 'JKS/PKCS12'}; "
        "export it to PEM (keytool -exportcert -rfc, or openssl pkcs12) or use ssl.ca.location"
    )


_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s;]+)')


def parse_jaas_config(text: str) -> tuple[str, str]:
    """``<LoginModule> required username="u" password="p";`` -> (u, p), for Kafka's PLAIN and SCRAM
    login modules (the only ones that carry a user name and password)."""
    module, _, rest = text.strip().partition(" ")
    if module not in _JAAS_MODULES:
        raise ValueError(
            f"sasl.jaas.config: {module or text!r} is not supported (use PlainLoginModule or ScramLoginModule)"
        )
    options = {}
    for name, raw in _JAAS_OPTION.findall(rest):
        options[name] = re.sub(r"\\(.)", r"\1", raw[1:-1]) if raw.startswith('"') else raw
    if "username" not in options or "password" not in options:
        raise ValueError('sasl.jaas.config: expected username="..." password="..."')
    return options["username"], options["password"]


def read_properties(text: str) -> dict[str, str]:
    """Java ``.properties`` (what ``--command-config`` files are): ``key=value``, ``key: value`` or
    ``key value``; ``#``/``!`` comments; a trailing backslash continues a line; backslash escapes."""
    out: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:  # an odd number of backslashes: the line goes on
            logical += line[:-1]
            continue
        logical += line
        m = re.match(r"((?:[^\s=:\\]|\\.)*)\s*[=:\s]?\s*(.*)$", logical)
        logical = ""
        assert m is not None
        key, value = (_unescape(g) for g in m.groups())
        if key:
            out[key] = value.rstrip()  # Java keeps trailing blanks; in a security setting they are a typo
    return out


def _unescape(s: str) -> str:
    def sub(m: re.Match[str]) -> str:
        c = m.group(1)
        if c.startswith("u"):
            return chr(int(c[1:], 16))
        return {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c)

    return re.sub(r"\\(u[0-9a-fA-F]{4}|.)", sub, s)


def parse_bootstrap(spec: str) -> list[tuple[str, int]]:
    """``host:port[,host:port...]``; IPv6 hosts in brackets (``[::1]:9092``)."""
    out = []
    for item in spec.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        host = host.strip("[]")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"bad bootstrap server {item!r}: expected HOST:PORT")
        out.append((host, int(port)))
    if not out:
        raise ValueError("no bootstrap server given")
    return out


class BrokerConnection:
    """One TCP connection to one broker, requests answered one at a time."""

    def __init__(
        self, host: str, port: int, *, timeout: float, client_id: str, security: Security | None = None
    ) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.client_id = client_id
        self.security = security or Security()
        self.versions: dict[int, tuple[int, int]] = {}
        self.principal: str | None = None  # the SASL user, once authenticated
        self._authenticating = False
        self._corr = 0
        try:
            self._sock: socket.socket = socket.create_connection((host, port), timeout=timeout)
        except TimeoutError:
            raise BrokerUnreachable(f"cannot connect to {self.address}: timed out after {timeout:g}s") from None
        except OSError as e:
            raise BrokerUnreachable(f"cannot connect to {self.address}: {e.strerror or e}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            if self.security.tls:
                self._start_tls()
            self._negotiate()
            if self.security.sasl:
                self._authenticate()
        except BaseException:
            self.close()
            raise

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def close(self) -> None:
        self._sock.close()

    # --- framing ------------------------------------------------------------------------------
    def _roundtrip(self, api: ApiSchema, version: int, body: dict[str, Any]) -> bytes:
        """Send one request and return the response body (after the response header)."""
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        flexible = api.is_flexible(version)
        header = REQUEST_HEADER.codec(2 if flexible else 1).encode(
            {
                "request_api_key": api.key,
                "request_api_version": version,
                "correlation_id": self._corr,
                "client_id": self.client_id,
            }
        )
        payload = header + api.request.codec(version).encode(body)
        try:
            self._sock.sendall(struct.pack(">i", len(payload)) + payload)
            head = self._recv_exact(4, api.name)
            (size,) = struct.unpack(">i", head)
            if not 4 <= size <= _MAX_RESPONSE_BYTES:
                if head[:1] in (b"\x15", b"\x16") and head[1:2] == b"\x03" and not self.security.tls:
                    # A TLS record (alert or handshake) where a Kafka frame should be.
                    raise BrokerUnreachable(
                        f"{self.address} answered with TLS: it is an SSL or SASL_SSL listener "
                        "(use --security-protocol SSL or SASL_SSL)"
                    )
                raise KafkaClientError(f"{self.address} sent a {size}-byte frame: not a Kafka broker?")
            frame = self._recv_exact(size, api.name)
        except TimeoutError:
            raise BrokerUnreachable(f"{self.address} did not answer {api.name} within {self.timeout:g}s") from None
        except ssl.SSLError as e:
            raise BrokerUnreachable(f"TLS connection to {self.address} failed: {e.reason or e}") from None
        except OSError as e:
            if isinstance(e, ConnectionResetError):
                raise self._closed(api.name) from None
            raise BrokerUnreachable(f"connection to {self.address} failed: {e.strerror or e}") from None
        # ApiVersions answers with response header v0 at every version (KIP-511).
        header_version = 1 if flexible and api.name != "ApiVersions" else 0
        resp_header, pos = RESPONSE_HEADER.codec(header_version).decode_at(frame)
        if resp_header["correlation_id"] != self._corr:
            raise KafkaClientError(f"{self.address} answered out of order: not a Kafka broker?")
        return frame[pos:]

    def _recv_exact(self, n: int, api: str) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise self._closed(api)
            buf += chunk
        return bytes(buf)

    def _closed(self, api: str) -> KafkaClientError:
        """The broker hung up instead of answering ``api``: say what that usually means."""
        if self._authenticating:
            return AuthenticationFailed(
                f"the broker {self.address} closed the connection during SASL authentication: "
                "wrong mechanism/credentials or a TLS listener?"
            )
        what = f"{self.address} closed the connection instead of answering {api}"
        if api == "ApiVersions" and not self.security.tls:
            return BrokerUnreachable(f"{what}: is it an SSL or SASL_SSL listener? (use --security-protocol)")
        if not self.security.sasl and self.versions:
            # A SASL listener answers ApiVersions, then closes a connection that skips authentication.
            return AuthenticationFailed(
                f"{what}: a SASL listener closes unauthenticated connections "
                "(use --security-protocol SASL_PLAINTEXT or SASL_SSL and credentials)",
                "AUTHENTICATION_REQUIRED",
            )
        return BrokerUnreachable(what)

    def _start_tls(self) -> None:
        ctx = self.security.ssl_context()
        try:
            self._sock = ctx.wrap_socket(self._sock, server_hostname=self.host)
        except ssl.SSLCertVerificationError as e:
            raise AuthenticationFailed(
                f"TLS: the certificate of {self.address} is not trusted: {e.verify_message} "
                "(give its CA with --ssl-cafile / ssl.ca.location)",
                "SSL_HANDSHAKE_FAILED",
            ) from None
        except TimeoutError:
            raise BrokerUnreachable(
                f"{self.address} did not complete a TLS handshake within {self.timeout:g}s"
            ) from None
        except (ssl.SSLError, OSError) as e:
            reason = getattr(e, "reason", None) or e.strerror or str(e) or type(e).__name__
            raise AuthenticationFailed(
                f"TLS handshake with {self.address} failed ({reason}): is it a PLAINTEXT or SASL_PLAINTEXT "
                "listener, or does it require a client certificate (--ssl-certfile/--ssl-keyfile)?",
                "SSL_HANDSHAKE_FAILED",
            ) from None

    def _authenticate(self) -> None:
        """SaslHandshake v1 then SaslAuthenticate, as Kafka's clients do (KIP-152)."""
        sec = self.security
        mechanism = sec.sasl_mechanism
        assert sec.sasl_username is not None and sec.sasl_password is not None
        self._authenticating = True
        try:
            if API_BY_NAME["SaslAuthenticate"].key not in self.versions:
                raise AuthenticationFailed(f"{self.address} does not offer SaslAuthenticate: not a SASL listener?")
            _, hs = self.send("SaslHandshake", {"mechanism": mechanism}, 1)
            if hs["error_code"] and hs["error_code"] != ErrorCode.UNSUPPORTED_SASL_MECHANISM:
                raise AuthenticationFailed(
                    f"{self.address} refused SASL ({error_name(hs['error_code'])}): is it a PLAINTEXT or SSL "
                    "listener? (use --security-protocol PLAINTEXT or SSL, without SASL)",
                    error_name(hs["error_code"]),
                )
            if hs["error_code"]:
                offered = ", ".join(hs["mechanisms"]) or "none"
                raise AuthenticationFailed(
                    f"{self.address} does not enable SASL mechanism {mechanism} (it offers: {offered})",
                    error_name(hs["error_code"]),
                )
            if mechanism == "PLAIN":
                self._sasl_step(f"\0{sec.sasl_username}\0{sec.sasl_password}".encode())
            else:
                client = scramp.ScramClient([mechanism], sec.sasl_username, sec.sasl_password)
                server_first = self._sasl_step(client.get_client_first().encode())
                try:
                    client.set_server_first(server_first.decode())
                    server_final = self._sasl_step(client.get_client_final().encode())
                    client.set_server_final(server_final.decode())
                except scramp.ScramException as e:
                    raise AuthenticationFailed(f"SCRAM with {self.address} failed: {e}") from None
            self.principal = sec.sasl_username
        finally:
            self._authenticating = False

    def _sasl_step(self, token: bytes) -> bytes:
        _, resp = self.send("SaslAuthenticate", {"auth_bytes": token})
        if resp["error_code"]:
            detail = resp.get("error_message") or error_name(resp["error_code"])
            raise AuthenticationFailed(
                f"SASL authentication of {self.security.sasl_username!r} ({self.security.sasl_mechanism}) "
                f"at {self.address} failed: {detail}",
                error_name(resp["error_code"]),
            )
        return bytes(resp["auth_bytes"])

    def _negotiate(self) -> None:
        api = API_BY_NAME["ApiVersions"]
        version = api.max_version
        body = {"client_software_name": "groupd-admin", "client_software_version": "1"}
        for _ in range(3):
            raw = self._roundtrip(api, version, body)
            # A broker that does not know our version answers in v0 and lists what it has.
            if len(raw) >= 2 and struct.unpack_from(">h", raw)[0] == ErrorCode.UNSUPPORTED_VERSION:
                theirs = {k["api_key"]: k["max_version"] for k in api.response.codec(0).decode(raw)["api_keys"]}
                version = min(version - 1, theirs.get(api.key, 0))
                continue
            resp = self._decode(api, version, raw)
            if resp["error_code"]:
                raise KafkaError("ApiVersions", resp["error_code"])
            self.versions = {k["api_key"]: (k["min_version"], k["max_version"]) for k in resp["api_keys"]}
            return
        raise KafkaClientError(f"{self.address}: ApiVersions negotiation failed")

    def _decode(self, api: ApiSchema, version: int, raw: bytes) -> dict[str, Any]:
        try:
            return api.response.codec(version).decode(raw)
        except DecodeError as e:
            raise KafkaClientError(f"{self.address}: undecodable {api.name} v{version} response: {e}") from None

    # --- requests -----------------------------------------------------------------------------
    def version_for(self, name: str) -> int:
        """The highest version of ``name`` that the broker advertises and our codec knows."""
        api = API_BY_NAME[name]
        if api.key not in self.versions:
            raise KafkaClientError(f"{self.address} does not support {name}")
        lo, hi = self.versions[api.key]
        version = min(hi, api.max_version)
        if version < max(lo, api.min_version):
            raise KafkaClientError(f"{self.address} supports {name} v{lo}-{hi}; this client knows v{api.min_version}+")
        return version

    def send(self, name: str, body: dict[str, Any], version: int | None = None) -> tuple[int, dict[str, Any]]:
        """Send ``name`` at ``version`` (default: the highest both know); returns (version, response)."""
        api = API_BY_NAME[name]
        v = self.version_for(name) if version is None else version
        return v, self._decode(api, v, self._roundtrip(api, v, body))


# --- results -----------------------------------------------------------------------------------


@dataclass
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None  # ListGroups v4+ only
    # ListGroups v5+ (KIP-848): "classic" or "consumer"; a broker without v5 has only classic groups
    group_type: str = "classic"


@dataclass
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    # None when the assignment is empty or not a consumer-protocol structure. During a rebalance
    # it is the member's last assignment (Kafka's describeNoMetadata), empty once a rebalance reset it.
    assignment: list[TopicPartition] | None
    # KIP-848 consumer groups only (ConsumerGroupDescribe): None for classic members
    member_epoch: int | None = None
    target_assignment: list[TopicPartition] | None = None
    subscribed_topics: list[str] | None = None
    subscribed_regex: str | None = None


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # a classic group's protocol; a consumer group's server-side assignor
    coordinator: str
    members: list[MemberDescription] = field(default_factory=list)
    group_type: str = "classic"
    # KIP-848 consumer groups only: the group epoch and the target assignment's epoch
    group_epoch: int | None = None
    assignment_epoch: int | None = None


@dataclass
class PartitionMetadata:
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]


@dataclass
class Metadata:
    brokers: dict[int, tuple[str, int]]
    # topic -> partition -> leader node id
    topics: dict[str, dict[int, int]]
    topic_errors: dict[str, int]
    partitions: dict[str, list[PartitionMetadata]] = field(default_factory=dict)
    internal: set[str] = field(default_factory=set)


@dataclass
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int  # -1 when no transaction is open
    partitions: list[TopicPartition]
    coordinator: str


class KafkaClient:
    """Admin operations against a cluster reached through ``bootstrap`` ("host:port[,...]")."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout: float = 10.0,
        client_id: str = "groupd-admin",
        security: Security | None = None,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self.client_id = client_id
        self.security = (security or Security()).validate()
        self._conns: dict[tuple[str, int], BrokerConnection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}

    def __enter__(self) -> KafkaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def connection(self, host: str, port: int) -> BrokerConnection:
        conn = self._conns.get((host, port))
        if conn is None:
            conn = self._conns[(host, port)] = BrokerConnection(
                host, port, timeout=self.timeout, client_id=self.client_id, security=self.security
            )
        return conn

    def any_connection(self) -> BrokerConnection:
        """A connection to the first bootstrap server that answers."""
        if self._conns:
            return next(iter(self._conns.values()))
        errors = []
        for host, port in self.bootstrap:
            try:
                return self.connection(host, port)
            except BrokerUnreachable as e:
                errors.append(str(e))
            # AuthenticationFailed is not retried on the next server: the credentials are the same.
        raise BrokerUnreachable("; ".join(errors))

    def node(self, node_id: int) -> BrokerConnection:
        if node_id not in self._brokers:
            self.metadata([])
        if node_id not in self._brokers:
            raise KafkaClientError(f"broker {node_id} is not in the cluster metadata")
        return self.connection(*self._brokers[node_id])

    def _retrying(self, attempt: Callable[[], T]) -> T:
        """Call ``attempt()`` until it does not raise a retriable KafkaError or the timeout passes."""
        deadline = time.monotonic() + self.timeout
        delay = 0.05
        while True:
            try:
                return attempt()
            except KafkaError as e:
                if e.code not in _RETRIABLE or time.monotonic() + delay > deadline:
                    raise
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    # --- cluster ------------------------------------------------------------------------------
    def api_versions(self) -> dict[int, tuple[int, int]]:
        return dict(self.any_connection().versions)

    def metadata(self, topics: list[str] | None = None) -> Metadata:
        """Brokers and partition leaders; ``topics=None`` asks for every topic. Never creates topics."""
        conn = self.any_connection()
        v = conn.version_for("Metadata")
        wanted = None if topics is None else [{"name": t} for t in topics]
        if v == 0 and wanted is None:
            wanted = []  # v0 has no null: an empty array means "all"
        _, resp = conn.send("Metadata", {"topics": wanted, "allow_auto_topic_creation": False}, v)
        self._brokers = {b["node_id"]: (b["host"], b["port"]) for b in resp["brokers"]}
        md = Metadata(dict(self._brokers), {}, {})
        for t in resp["topics"]:
            if t["error_code"]:
                md.topic_errors[t["name"]] = t["error_code"]
                continue
            md.topics[t["name"]] = {p["partition_index"]: p["leader_id"] for p in t["partitions"]}
            md.partitions[t["name"]] = sorted(
                (
                    PartitionMetadata(p["partition_index"], p["leader_id"], p["replica_nodes"], p["isr_nodes"])
                    for p in t["partitions"]
                ),
                key=lambda pm: pm.partition,
            )
            if t.get("is_internal"):
                md.internal.add(t["name"])
        return md

    def _controller(self) -> BrokerConnection:
        """Where topic changes go: the controller Metadata names (any broker forwards them in KRaft)."""
        conn = self.any_connection()
        v = conn.version_for("Metadata")
        _, resp = conn.send("Metadata", {"topics": [], "allow_auto_topic_creation": False}, v)
        brokers = {b["node_id"]: (b["host"], b["port"]) for b in resp["brokers"]}
        controller = resp.get("controller_id", -1)
        return self.connection(*brokers[controller]) if controller in brokers else conn

    def supports(self, name: str) -> bool:
        """Whether the broker advertises ``name`` in ApiVersions (at any version)."""
        api = API_BY_NAME.get(name)
        key = api.key if api is not None else _KNOWN_API_KEYS.get(name)
        return key in self.any_connection().versions

    # --- topics -------------------------------------------------------------------------------
    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
    ) -> dict[str, Any]:
        """CreateTopics for one topic; returns the broker's answer for it (partitions, configs at v5+)."""
        conn = self._controller()
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in configs.items()],
                }
            ],
            "timeout_ms": int(self.timeout * 1000),
            "validate_only": False,
        }
        _, resp = conn.send("CreateTopics", body)
        (t,) = resp["topics"]
        if t["error_code"]:
            raise KafkaError("CreateTopics", t["error_code"], t.get("error_message"))
        return t

    def delete_topic(self, name: str) -> None:
        conn = self._controller()
        v = conn.version_for("DeleteTopics")
        body: dict[str, Any] = {"timeout_ms": int(self.timeout * 1000)}
        if v >= 6:
            body["topics"] = [{"name": name, "topic_id": b"\0" * 16}]
        else:
            body["topic_names"] = [name]
        _, resp = conn.send("DeleteTopics", body, v)
        (r,) = resp["responses"]
        if r["error_code"]:
            raise KafkaError("DeleteTopics", r["error_code"], r.get("error_message"))

    def create_partitions(self, name: str, count: int) -> None:
        """CreatePartitions: grow ``name`` to ``count`` partitions in total."""
        body = {
            "topics": [{"name": name, "count": count, "assignments": None}],
            "timeout_ms": int(self.timeout * 1000),
            "validate_only": False,
        }
        _, resp = self._controller().send("CreatePartitions", body)
        (r,) = resp["results"]
        if r["error_code"]:
            raise KafkaError("CreatePartitions", r["error_code"], r.get("error_message"))

    def describe_topic_configs(self, name: str) -> list[dict[str, Any]]:
        """DescribeConfigs of one topic: every config with its value, source and read-only flag."""
        body = {
            "resources": [{"resource_type": _TOPIC_RESOURCE, "resource_name": name, "configuration_keys": None}],
            "include_synonyms": False,
            "include_documentation": False,
        }
        _, resp = self.any_connection().send("DescribeConfigs", body)
        (r,) = resp["results"]
        if r["error_code"]:
            raise KafkaError("DescribeConfigs", r["error_code"], r.get("error_message"))
        return list(r["configs"])

    def alter_topic_configs(self, name: str, configs: dict[str, str | None]) -> str:
        """Set (or, for None, delete) topic configs; returns the API used. IncrementalAlterConfigs
        where the broker has it; else AlterConfigs over the topic's current overrides (which it replaces)."""
        if self.supports("IncrementalAlterConfigs"):
            ops = [
                {"name": k, "config_operation": _OP_DELETE if v is None else _OP_SET, "value": v}
                for k, v in configs.items()
            ]
            api = "IncrementalAlterConfigs"
        else:
            current = {
                c["name"]: c["value"]
                for c in self.describe_topic_configs(name)
                if c.get("config_source") == DYNAMIC_TOPIC_CONFIG
            }
            merged = {**current, **configs}
            ops = [{"name": k, "value": v} for k, v in merged.items() if v is not None]
            api = "AlterConfigs"
        body = {
            "resources": [{"resource_type": _TOPIC_RESOURCE, "resource_name": name, "configs": ops}],
            "validate_only": False,
        }
        _, resp = self.any_connection().send(api, body)
        (r,) = resp["responses"]
        if r["error_code"]:
            raise KafkaError(api, r["error_code"], r.get("error_message"))
        return api

    def coordinator(self, group: str, key_type: int = 0) -> BrokerConnection:
        """The coordinator of a group (key type 0) or of a transactional id (key type 1)."""
        conn = self.any_connection()

        def find() -> BrokerConnection:
            v = conn.version_for("FindCoordinator")
            if v >= 4:
                _, resp = conn.send("FindCoordinator", {"key_type": key_type, "coordinator_keys": [group]}, v)
                answer = resp["coordinators"][0]
            else:
                _, answer = conn.send("FindCoordinator", {"key": group, "key_type": key_type}, v)
            if answer["error_code"]:
                raise KafkaError("FindCoordinator", answer["error_code"], answer.get("error_message"))
            return self.connection(answer["host"], answer["port"])

        return self._retrying(find)

    # --- groups -------------------------------------------------------------------------------
    def list_groups(self, states: list[str] | None = None, types: list[str] | None = None) -> list[GroupListing]:
        """Every group of every broker (each broker lists the groups it coordinates); ``types``
        ("classic", "consumer") filters as ListGroups v5's TypesFilter does."""
        self.metadata([])
        found: dict[str, GroupListing] = {}
        for host, port in sorted(set(self._brokers.values())) or self.bootstrap:
            conn = self.connection(host, port)

            def ask(conn: BrokerConnection = conn) -> tuple[int, dict[str, Any]]:
                v = conn.version_for("ListGroups")
                body = {"states_filter": list(states or []), "types_filter": list(types or [])}
                v, resp = conn.send("ListGroups", body, v)
                if resp["error_code"]:
                    raise KafkaError("ListGroups", resp["error_code"])
                return v, resp

            v, resp = self._retrying(ask)
            for g in resp["groups"]:
                state = g.get("group_state") if v >= 4 else None
                gtype = g.get("group_type", "classic") if v >= 5 else "classic"
                found[g["group_id"]] = GroupListing(g["group_id"], g["protocol_type"], state, gtype.lower())
        listed = sorted(found.values(), key=lambda g: g.group_id)
        if types:
            # Before v5 the broker cannot filter, but then every group it has is a classic one.
            wanted_types = {t.lower() for t in types}
            listed = [g for g in listed if g.group_type in wanted_types]
        if states and listed and listed[0].state is None:
            # Brokers before ListGroups v4 cannot filter: ask DescribeGroups for the states.
            for g in listed:
                d = self.describe_group(g.group_id)
                g.state = d.state if d else "Dead"
            wanted = {s.lower() for s in states}
            listed = [g for g in listed if (g.state or "").lower() in wanted]
        return listed

    # --- transactions -------------------------------------------------------------------------
    def list_transactions(
        self, states: list[str] | None = None, producer_ids: list[int] | None = None
    ) -> list[TransactionListing]:
        """Every transactional id of every broker (ListTransactions; each broker lists the ids it
        coordinates), as Kafka's ``Admin.listTransactions``."""
        self.metadata([])
        found: dict[str, TransactionListing] = {}
        for host, port in sorted(set(self._brokers.values())) or self.bootstrap:
            conn = self.connection(host, port)

            def ask(conn: BrokerConnection = conn) -> dict[str, Any]:
                body = {"state_filters": list(states or []), "producer_id_filters": list(producer_ids or [])}
                _, resp = conn.send("ListTransactions", body)
                if resp["error_code"]:
                    raise KafkaError("ListTransactions", resp["error_code"])
                return resp

            for t in self._retrying(ask)["transaction_states"]:
                found[t["transactional_id"]] = TransactionListing(
                    t["transactional_id"], t["producer_id"], t["transaction_state"]
                )
        return sorted(found.values(), key=lambda t: t.transactional_id)

    def describe_transaction(self, transactional_id: str) -> TransactionDescription | None:
        """The transaction as its coordinator sees it, or None when the id is unknown."""

        def ask() -> tuple[BrokerConnection, dict[str, Any]]:
            coord = self.coordinator(transactional_id, key_type=1)
            _, resp = coord.send("DescribeTransactions", {"transactional_ids": [transactional_id]})
            t = resp["transaction_states"][0]
            if t["error_code"] and t["error_code"] != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                raise KafkaError("DescribeTransactions", t["error_code"])
            return coord, t

        coord, t = self._retrying(ask)
        if t["error_code"] == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
            return None
        return TransactionDescription(
            transactional_id=t["transactional_id"],
            state=t["transaction_state"],
            producer_id=t["producer_id"],
            producer_epoch=t["producer_epoch"],
            timeout_ms=t["transaction_timeout_ms"],
            start_time_ms=t["transaction_start_time_ms"],
            partitions=sorted((x["topic"], p) for x in t["topics"] for p in x["partitions"]),
            coordinator=coord.address,
        )

    def describe_group(self, group: str) -> GroupDescription | None:
        """The group as its coordinator sees it, or None when it does not exist (Dead). As Kafka's
        admin client (``DescribeConsumerGroupsHandler``): ConsumerGroupDescribe first where the broker
        has it, DescribeGroups when that says the group is not a consumer group."""
        if self.supports("ConsumerGroupDescribe"):
            d = self.describe_consumer_group(group)
            if d is not None:
                return d
        return self._describe_classic_group(group)

    def describe_consumer_group(self, group: str) -> GroupDescription | None:
        """ConsumerGroupDescribe of one KIP-848 group; None when the broker knows no consumer group
        of that id (GROUP_ID_NOT_FOUND: it does not exist, or it is a classic group)."""

        def ask() -> tuple[BrokerConnection, dict[str, Any]]:
            coord = self.coordinator(group)
            _, resp = coord.send(
                "ConsumerGroupDescribe", {"group_ids": [group], "include_authorized_operations": False}
            )
            g = resp["groups"][0]
            if g["error_code"] and g["error_code"] != ErrorCode.GROUP_ID_NOT_FOUND:
                raise KafkaError("ConsumerGroupDescribe", g["error_code"], g.get("error_message"))
            return coord, g

        coord, g = self._retrying(ask)
        if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND:
            return None

        def partitions(a: dict[str, Any]) -> list[TopicPartition]:
            return sorted((tp["topic_name"], p) for tp in a["topic_partitions"] for p in tp["partitions"])

        members = [
            MemberDescription(
                m["member_id"],
                m["client_id"],
                m["client_host"],
                m.get("instance_id"),
                partitions(m["assignment"]),
                member_epoch=m["member_epoch"],
                target_assignment=partitions(m["target_assignment"]),
                subscribed_topics=list(m["subscribed_topic_names"]),
                subscribed_regex=m.get("subscribed_topic_regex"),
            )
            for m in g["members"]
        ]
        return GroupDescription(
            group_id=g["group_id"],
            state=g["group_state"],
            protocol_type="consumer",
            protocol=g["assignor_name"],
            coordinator=coord.address,
            members=members,
            group_type="consumer",
            group_epoch=g["group_epoch"],
            assignment_epoch=g["assignment_epoch"],
        )

    def _describe_classic_group(self, group: str) -> GroupDescription | None:
        def ask() -> tuple[BrokerConnection, dict[str, Any]]:
            coord = self.coordinator(group)
            _, resp = coord.send("DescribeGroups", {"groups": [group], "include_authorized_operations": False})
            g = resp["groups"][0]
            if g["error_code"] and g["error_code"] != ErrorCode.GROUP_ID_NOT_FOUND:
                raise KafkaError("DescribeGroups", g["error_code"], g.get("error_message"))
            return coord, g

        coord, g = self._retrying(ask)
        if g["error_code"] == ErrorCode.GROUP_ID_NOT_FOUND or g["group_state"] == "Dead":
            return None
        members = []
        for m in g["members"]:
            assignment: list[TopicPartition] | None = None
            if g["protocol_type"] == "consumer" and m["member_assignment"]:
                try:
                    a = decode_assignment(m["member_assignment"])
                    assignment = sorted((tp.topic, p) for tp in a.assigned_partitions for p in tp.partitions)
                except ConsumerProtocolError:
                    assignment = None
            members.append(
                MemberDescription(
                    m["member_id"], m["client_id"], m["client_host"], m.get("group_instance_id"), assignment
                )
            )
        return GroupDescription(
            group_id=g["group_id"],
            state=g["group_state"],
            protocol_type=g["protocol_type"],
            protocol=g["protocol_data"],
            coordinator=coord.address,
            members=members,
        )

    def delete_group(self, group: str) -> None:
        def ask() -> None:
            _, resp = self.coordinator(group).send("DeleteGroups", {"groups_names": [group]})
            code = resp["results"][0]["error_code"]
            if code:
                raise KafkaError("DeleteGroups", code)

        self._retrying(ask)

    # --- offsets ------------------------------------------------------------------------------
    def committed_offsets(self, group: str) -> dict[TopicPartition, int]:
        """Every committed offset of ``group`` (partitions without one are left out)."""

        def ask() -> list[dict[str, Any]]:
            coord = self.coordinator(group)
            v = coord.version_for("OffsetFetch")
            if v < 2:
                raise KafkaClientError(f"{coord.address} cannot list all offsets of a group (OffsetFetch v{v})")
            if v >= 8:
                _, resp = coord.send("OffsetFetch", {"groups": [{"group_id": group, "topics": None}]}, v)
                g = resp["groups"][0]
                code, topics = g["error_code"], g["topics"]
            else:
                _, resp = coord.send("OffsetFetch", {"group_id": group, "topics": None}, v)
                code, topics = resp["error_code"], resp["topics"]
            if code:
                raise KafkaError("OffsetFetch", code)
            return topics

        out: dict[TopicPartition, int] = {}
        for t in self._retrying(ask):
            for p in t["partitions"]:
                if p["error_code"]:
                    raise KafkaError("OffsetFetch", p["error_code"], f"{t['name']}-{p['partition_index']}")
                if p["committed_offset"] >= 0:
                    out[(t["name"], p["partition_index"])] = p["committed_offset"]
        return out

    def list_offsets(self, partitions: list[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """The offset per partition for ``timestamp`` (ms, or EARLIEST/LATEST_TIMESTAMP); -1 where no
        record has a timestamp at or after it. Each partition is asked of its leader."""
        md = self.metadata(sorted({t for t, _ in partitions}))
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, p in partitions:
            if topic not in md.topics:
                code = md.topic_errors.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                raise KafkaError("Metadata", code, topic)
            leader = md.topics[topic].get(p)
            if leader is None:
                raise KafkaError("Metadata", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{p}")
            by_leader.setdefault(leader, {}).setdefault(topic, []).append(p)
        out: dict[TopicPartition, int] = {}
        for leader, topics in by_leader.items():
            body = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {"name": t, "partitions": [{"partition_index": p, "timestamp": timestamp} for p in ps]}
                    for t, ps in topics.items()
                ],
            }
            _, resp = self.node(leader).send("ListOffsets", body)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        raise KafkaError("ListOffsets", p["error_code"], f"{t['name']}-{p['partition_index']}")
                    out[(t["name"], p["partition_index"])] = p["offset"]
        return out

    def commit_offsets(self, group: str, offsets: dict[TopicPartition, int]) -> None:
        """Commit as an administrator: no member id, no generation (allowed while the group is Empty)."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, p), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(
                {"partition_index": p, "committed_offset": offset, "committed_metadata": ""}
            )
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        def ask() -> None:
            _, resp = self.coordinator(group).send("OffsetCommit", body)
            for t in resp["topics"]:
                for p in t["partitions"]:
                    if p["error_code"]:
                        raise KafkaError("OffsetCommit", p["error_code"], f"{t['name']}-{p['partition_index']}")

        self._retrying(ask)

    def delete_offsets(self, group: str, topic: str, partitions: list[int]) -> dict[int, int]:
        """OffsetDelete: the committed offsets of ``topic``'s ``partitions``; per-partition error codes
        (GROUP_SUBSCRIBED_TO_TOPIC when an active member still consumes the topic)."""
        body = {
            "group_id": group,
            "topics": [{"name": topic, "partitions": [{"partition_index": p} for p in partitions]}],
        }

        def ask() -> dict[int, int]:
            _, resp = self.coordinator(group).send("OffsetDelete", body)
            if resp["error_code"]:
                raise KafkaError("OffsetDelete", resp["error_code"])
            return {p["partition_index"]: p["error_code"] for t in resp["topics"] for p in t["partitions"]}

        return self._retrying(ask)
