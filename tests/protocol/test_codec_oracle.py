"""Our codec against kio, an independently generated Kafka codec, for every (api, version) both define.

For each message hypothesis draws a kio instance; kio's bytes must equal ours for the same message,
and each side must decode the other's bytes back to the same value. The versions kio lacks are
listed in ``KIO_MISSING`` and covered by hand-written byte vectors in ``test_codec_vectors.py``.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from groupd.protocol import primitives as p
from groupd.protocol.messages import ALL_APIS
from groupd.protocol.messages.headers import REQUEST_HEADER, RESPONSE_HEADER
from groupd.protocol.schema import MessageSchema, snake_case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.protocol.kio_oracle import kio_class, kio_decode, kio_defaults, kio_encode, kio_strategy, to_ours

CASES: list[tuple[str, MessageSchema, int, type]] = []
KIO_MISSING: list[tuple[str, int]] = []
for _api in ALL_APIS:
    for _v in range(_api.min_version, _api.max_version + 1):
        for _kind, _schema in (("request", _api.request), ("response", _api.response)):
            _cls = kio_class(_api.name, _v, _kind)
            if _cls is None:
                if _kind == "request":
                    KIO_MISSING.append((_api.name, _v))
                continue
            CASES.append((f"{_api.name}{_kind.capitalize()}-v{_v}", _schema, _v, _cls))

for _name, _schema, _versions in (
    ("RequestHeader", REQUEST_HEADER, range(1, 3)),  # kio has no v0 request header
    ("ResponseHeader", RESPONSE_HEADER, range(2)),
):
    for _v in _versions:
        _module = importlib.import_module(f"kio.schema.{snake_case(_name)}.v{_v}")
        CASES.append((f"{_name}-v{_v}", _schema, _v, getattr(_module, _name)))


def test_kio_missing_versions_are_the_known_ones() -> None:
    # kio follows Kafka 4.x, which dropped these old versions (KIP-896); test_codec_vectors.py covers
    # them, and test_codec_old_versions.py checks the data-plane ones against kafka-python's structs.
    assert sorted(KIO_MISSING) == sorted(
        [
            ("Produce", 0),
            ("Produce", 1),
            ("Produce", 2),
            ("Fetch", 0),
            ("Fetch", 1),
            ("Fetch", 2),
            ("Fetch", 3),
            ("ListOffsets", 0),
            ("CreateTopics", 0),
            ("CreateTopics", 1),
            ("DeleteTopics", 0),
            ("OffsetCommit", 0),
            ("OffsetCommit", 1),
            ("OffsetFetch", 0),
            ("DescribeConfigs", 0),
            ("CreateAcls", 0),
            ("DescribeAcls", 0),
            ("DeleteAcls", 0),
            ("OffsetForLeaderEpoch", 0),
            ("OffsetForLeaderEpoch", 1),
            ("DescribeLogDirs", 0),
        ]
    )


@pytest.mark.parametrize(("schema", "version", "cls"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_bytes_equal_kio(schema: MessageSchema, version: int, cls: type, data: st.DataObject) -> None:
    codec = schema.codec(version)
    msg = data.draw(kio_strategy(cls), label="kio message")
    theirs = kio_encode(msg)
    ours_value = to_ours(msg)
    ours = codec.encode(ours_value)
    assert ours == theirs
    assert codec.decode(theirs) == ours_value
    assert kio_decode(cls, ours) == msg


def _our_defaults(struct: p.KStruct, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fld in [*struct.fields, *(struct.tagged or [])]:
        sub = fld.subcon.subcon if isinstance(fld.subcon, p.KArray) else fld.subcon
        if isinstance(sub, p.KNullableStruct):
            sub = sub.struct
        out[prefix + fld.name] = fld.default
        if isinstance(sub, p.KStruct):
            out.update(_our_defaults(sub, f"{prefix}{fld.name}."))
    return out


@pytest.mark.parametrize(("schema", "version", "cls"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_field_names_and_defaults_match_kio(schema: MessageSchema, version: int, cls: type) -> None:
    # Defaults of regular fields never reach the wire when a value is given, so the byte comparison
    # above cannot see them; they decide what the daemon sends when a handler leaves a field out.
    expected = kio_defaults(cls)
    if schema is REQUEST_HEADER:
        # Kafka's RequestHeader.json gives ClientId no default (so ""); ours writes null when absent.
        expected["client_id"] = None
    assert _our_defaults(schema.struct(version)) == expected
