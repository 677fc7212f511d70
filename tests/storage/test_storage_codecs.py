"""Kafka's framing of snappy and LZ4 over the libraries (``storage/codecs.py``).

Real compressed input (from sarama's Go encoders) is read in ``tests/e2e/test_old_clients_e2e.py``;
here: xxHash32's vectors, KAFKA-3160's header checksum, round trips, and bounds.
"""

from __future__ import annotations

import contextlib

import pytest
from groupd.storage import codecs
from groupd.storage import records as rec
from groupd.storage.errors import CorruptRecordError, UnsupportedCompressionError
from hypothesis import given, settings
from hypothesis import strategies as st

LIMIT = 1 << 20


def test_xxh32_reference_vectors() -> None:
    # From the xxHash reference implementation's test suite / python-xxhash's documentation.
    assert codecs.xxh32(b"") == 0x02CC5D05
    assert codecs.xxh32(b"a") == 0x550D7456
    assert codecs.xxh32(b"abc") == 0x32D153FF
    assert codecs.xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_lz4_frame_header_checksums() -> None:
    # The standard header checksum and Kafka's magic 0 one (KAFKA-3160: the magic is hashed too).
    descriptor = bytes((0x60, 0x40))
    assert codecs.lz4_compress(b"")[6] == (codecs.xxh32(descriptor) >> 8) & 0xFF
    assert (
        codecs.lz4_compress(b"", broken_checksum=True)[6] == (codecs.xxh32(codecs._LZ4_MAGIC + descriptor) >> 8) & 0xFF
    )


def test_a_standard_frame_with_matches_reads_and_kafkas_magic_0_checksum_too() -> None:
    import lz4.frame as lz4_frame

    data = b"abc" * 1000 + b"x"  # the library's own encoder: real matches
    frame = lz4_frame.compress(data, store_size=False)
    assert codecs.lz4_decompress(frame, LIMIT) == data
    broken = bytearray(frame)
    broken[6] = (codecs.xxh32(codecs._LZ4_MAGIC + bytes(frame[4:6])) >> 8) & 0xFF
    assert codecs.lz4_decompress(bytes(broken), LIMIT) == data
    broken[6] ^= 0x55  # neither checksum: damaged
    with pytest.raises(CorruptRecordError):
        codecs.lz4_decompress(bytes(broken), LIMIT)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.integers(1, 4))
def test_round_trips(data: bytes, repeat: int) -> None:
    data = data * repeat
    assert codecs.snappy_decompress(codecs.snappy_compress(data), LIMIT) == data
    assert codecs.lz4_decompress(codecs.lz4_compress(data), LIMIT) == data
    assert codecs.lz4_decompress(codecs.lz4_compress(data, broken_checksum=True), LIMIT) == data


def test_blocks_and_chunks_larger_than_one() -> None:
    data = bytes(range(256)) * 800  # 200 KiB: several xerial blocks, LZ4 blocks and snappy literals
    assert codecs.snappy_decompress(codecs.snappy_compress(data), LIMIT) == data
    assert codecs.lz4_decompress(codecs.lz4_compress(data), LIMIT) == data


def test_output_is_bounded() -> None:
    with pytest.raises(CorruptRecordError, match="declares"):
        codecs.snappy_decompress(b"\xff\xff\xff\x7f", 1000)
    # 10 KiB of output from a few dozen bytes of input: refused beyond the limit.
    frame = codecs.lz4_compress(b"a" * 10_240)
    assert len(codecs.lz4_decompress(frame, LIMIT)) == 10_240
    with pytest.raises(CorruptRecordError, match="exceeds"):
        codecs.lz4_decompress(frame, 1000)
    with pytest.raises(CorruptRecordError, match="declares"):
        codecs.snappy_decompress(codecs.snappy_compress(b"b" * 10_240), 1000)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_is_a_corrupt_record_never_a_crash(data: bytes) -> None:
    for codec, payload in (
        (rec.COMPRESSION_SNAPPY, data),
        (rec.COMPRESSION_LZ4, codecs._LZ4_MAGIC + data),
    ):
        with contextlib.suppress(CorruptRecordError, UnsupportedCompressionError):
            rec._decompress(codec, payload, 10_000)


def test_batches_are_built_and_read_with_every_codec() -> None:
    records = [(b"k", b"v" * 100, [], 5)] * 10
    for codec in (rec.COMPRESSION_SNAPPY, rec.COMPRESSION_LZ4):
        view = rec.BatchView(rec.build_batch(records, compression=codec))
        view.validate()
        assert view.compression == codec
        assert [r.value for r in view.records()] == [b"v" * 100] * 10
