"""The versions Kafka 4 removed, against kafka-python's hand-written protocol classes.

kio follows Kafka 4.x and has no Produce v0-2, Fetch v0-3 or ListOffsets v0 (see
``test_codec_oracle.test_kio_missing_versions_are_the_known_ones``). kafka-python 3.0 still carries
the structs it wrote by hand for them (``kafka.protocol.old``), an implementation independent of ours
and of Kafka's JSON specs: for messages hypothesis draws from its schema, its bytes must equal ours
and each side must read the other's. ``test_codec_vectors.py`` has hand-written vectors for them too.
"""

from __future__ import annotations

from io import BytesIO
from typing import Any

import pytest
from groupd.protocol.messages import API_BY_NAME
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.old import fetch, list_offsets, produce
from kafka.protocol.old import types as kp

OLD_VERSIONS = {"Produce": (produce, range(3)), "Fetch": (fetch, range(4)), "ListOffsets": (list_offsets, range(1))}
CASES = [
    (name, version, kind, getattr(module, f"{name}{kind}_v{version}"))
    for name, (module, versions) in OLD_VERSIONS.items()
    for version in versions
    for kind in ("Request", "Response")
]
_INTS = {kp.Int8: 8, kp.Int16: 16, kp.Int32: 32, kp.Int64: 64}


def _strategy(t: Any) -> st.SearchStrategy[Any]:
    if isinstance(t, kp.Schema):
        return st.tuples(*[_strategy(sub) for sub in t.fields])
    if isinstance(t, kp.Array):
        return st.lists(_strategy(t.array_of), max_size=3)
    if isinstance(t, kp.String):
        return st.text(max_size=10)
    if t is kp.Bytes:
        return st.none() | st.binary(max_size=24)
    bits = _INTS[t]
    return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def _to_dict(t: Any, value: Any) -> Any:
    if isinstance(t, kp.Schema):
        return {name: _to_dict(sub, v) for name, sub, v in zip(t.names, t.fields, value)}
    if isinstance(t, kp.Array):
        return [_to_dict(t.array_of, v) for v in value]
    return value


def test_every_removed_version_is_served() -> None:
    # Kafka 3.9's ranges (KIP-896 removed these in 4.0): the union is what groupd serves.
    for name, (_module, versions) in OLD_VERSIONS.items():
        assert API_BY_NAME[name].min_version == 0 and all(API_BY_NAME[name].supports(v) for v in versions)


@pytest.mark.parametrize(("name", "version", "kind", "cls"), CASES, ids=[f"{c[0]}{c[2]}-v{c[1]}" for c in CASES])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_bytes_equal_kafka_python(name: str, version: int, kind: str, cls: Any, data: st.DataObject) -> None:
    api = API_BY_NAME[name]
    codec = (api.request if kind == "Request" else api.response).codec(version)
    value = data.draw(_strategy(cls.SCHEMA), label="kafka-python message")
    theirs = cls.SCHEMA.encode(value)
    ours_value = _to_dict(cls.SCHEMA, value)
    assert codec.encode(ours_value) == theirs
    assert codec.decode(theirs) == ours_value
    assert cls.SCHEMA.decode(BytesIO(codec.encode(ours_value))) == value
