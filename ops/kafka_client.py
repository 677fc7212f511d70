"""A small synchronous Kafka admin client on groupd's own codec.

It speaks to any broker (groupd or a real Kafka cluster): ApiVersions on every connection picks the
highest version both sides know, Metadata finds brokers and partition leaders, FindCoordinator
finds a group's coordinator. The administrative calls (ListGroups, DescribeGroups, OffsetFetch,
ListOffsets, OffsetCommit, DeleteGroups) are what ``groupd groups ...`` / ``groupd offsets ...``
and ``groupd healthcheck`` are built from.

Blocking sockets rather than asyncio: a command line tool makes a handful of requests one after
another, and a plain socket with a timeout keeps every failure a single, explainable exception.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

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
T = TypeVar("T")


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

    def __init__(self, host: str, port: int, *, timeout: float, client_id: str) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self.client_id = client_id
        self.versions: dict[int, tuple[int, int]] = {}
        self._corr = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout)
        except TimeoutError:
            raise BrokerUnreachable(f"cannot connect to {self.address}: timed out after {timeout:g}s") from None
        except OSError as e:
            raise BrokerUnreachable(f"cannot connect to {self.address}: {e.strerror or e}") from None
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            self._negotiate()
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
            (size,) = struct.unpack(">i", self._recv_exact(4))
            if not 4 <= size <= _MAX_RESPONSE_BYTES:
                raise KafkaClientError(f"{self.address} sent a {size}-byte frame: not a Kafka broker?")
            frame = self._recv_exact(size)
        except TimeoutError:
            raise BrokerUnreachable(f"{self.address} did not answer {api.name} within {self.timeout:g}s") from None
        except OSError as e:
            raise BrokerUnreachable(f"connection to {self.address} failed: {e.strerror or e}") from None
        # ApiVersions answers with response header v0 at every version (KIP-511).
        header_version = 1 if flexible and api.name != "ApiVersions" else 0
        resp_header, pos = RESPONSE_HEADER.codec(header_version).decode_at(frame)
        if resp_header["correlation_id"] != self._corr:
            raise KafkaClientError(f"{self.address} answered out of order: not a Kafka broker?")
        return frame[pos:]

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self._sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise BrokerUnreachable(f"{self.address} closed the connection")
            buf += chunk
        return bytes(buf)

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


@dataclass
class MemberDescription:
    member_id: str
    client_id: str
    host: str
    instance_id: str | None
    # None when the assignment is empty or not a consumer-protocol structure. During a rebalance
    # it is the member's last assignment (Kafka's describeNoMetadata), empty once a rebalance reset it.
    assignment: list[TopicPartition] | None


@dataclass
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    coordinator: str
    members: list[MemberDescription] = field(default_factory=list)


@dataclass
class Metadata:
    brokers: dict[int, tuple[str, int]]
    # topic -> partition -> leader node id
    topics: dict[str, dict[int, int]]
    topic_errors: dict[str, int]


class KafkaClient:
    """Admin operations against a cluster reached through ``bootstrap`` ("host:port[,...]")."""

    def __init__(self, bootstrap: str, *, timeout: float = 10.0, client_id: str = "groupd-admin") -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.timeout = timeout
        self.client_id = client_id
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
                host, port, timeout=self.timeout, client_id=self.client_id
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
        return md

    def coordinator(self, group: str) -> BrokerConnection:
        conn = self.any_connection()

        def find() -> BrokerConnection:
            v = conn.version_for("FindCoordinator")
            if v >= 4:
                _, resp = conn.send("FindCoordinator", {"key_type": 0, "coordinator_keys": [group]}, v)
                answer = resp["coordinators"][0]
            else:
                _, answer = conn.send("FindCoordinator", {"key": group, "key_type": 0}, v)
            if answer["error_code"]:
                raise KafkaError("FindCoordinator", answer["error_code"], answer.get("error_message"))
            return self.connection(answer["host"], answer["port"])

        return self._retrying(find)

    # --- groups -------------------------------------------------------------------------------
    def list_groups(self, states: list[str] | None = None) -> list[GroupListing]:
        """Every group of every broker (each broker lists the groups it coordinates)."""
        self.metadata([])
        found: dict[str, GroupListing] = {}
        for host, port in sorted(set(self._brokers.values())) or self.bootstrap:
            conn = self.connection(host, port)

            def ask(conn: BrokerConnection = conn) -> tuple[int, dict[str, Any]]:
                v = conn.version_for("ListGroups")
                v, resp = conn.send("ListGroups", {"states_filter": list(states or [])}, v)
                if resp["error_code"]:
                    raise KafkaError("ListGroups", resp["error_code"])
                return v, resp

            v, resp = self._retrying(ask)
            for g in resp["groups"]:
                state = g.get("group_state") if v >= 4 else None
                found[g["group_id"]] = GroupListing(g["group_id"], g["protocol_type"], state)
        listed = sorted(found.values(), key=lambda g: g.group_id)
        if states and listed and listed[0].state is None:
            # Brokers before ListGroups v4 cannot filter: ask DescribeGroups for the states.
            for g in listed:
                d = self.describe_group(g.group_id)
                g.state = d.state if d else "Dead"
            wanted = {s.lower() for s in states}
            listed = [g for g in listed if (g.state or "").lower() in wanted]
        return listed

    def describe_group(self, group: str) -> GroupDescription | None:
        """The group as its coordinator sees it, or None when it does not exist (Dead)."""

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
