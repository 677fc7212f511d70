"""The pure-Python snappy and LZ4 fallbacks (``storage/codecs.py``).

Real compressed input (with matches, from sarama's Go encoders) is read in
``tests/e2e/test_old_clients_e2e.py``; here: the formats' own vectors, round trips, and bounds.
"""

from __future__ import annotations

import contextlib
import struct

import pytest
from groupd.storage import codecs
from groupd.storage import records as rec
from groupd.storage.errors import CorruptRecordError, UnsupportedCompressionError
from hypothesis import given, settings
from hypothesis import strategies as st

LIMIT = 1 << 20


def lz4_frame(*blocks: bytes, flg: int = 0x60) -> bytes:
    out = codecs._LZ4_MAGIC + bytes((flg, 0x40, 0))  # header checksum not checked by the reader
    for b in blocks:
        out += struct.pack("<I", len(b)) + b
    return out + b"\0\0\0\0"


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


def test_snappy_copies_from_the_format_description() -> None:
    # len 12 | literal "abc" | copy-1 (length 9, offset 3, overlapping)
    assert codecs.snappy_raw_decompress(bytes.fromhex("0c 08 616263 15 03"), LIMIT) == b"abc" * 4
    # len 6 | literal "ab" | copy-2 (length 4, offset 2)
    assert codecs.snappy_raw_decompress(bytes.fromhex("06 04 6162 0e 0200"), LIMIT) == b"ababab"
    # literal with a one-byte length (tag 60): 61 bytes
    assert codecs.snappy_raw_decompress(bytes((61, 60 << 2, 60)) + b"z" * 61, LIMIT) == b"z" * 61


def test_lz4_block_with_a_match() -> None:
    # token 0x35: 3 literals, match length 5 + 4 = 9 at offset 3; then token 0x10: 1 literal.
    block = bytes.fromhex("35 616263 0300 10 78")
    assert codecs.lz4_decompress(lz4_frame(block), LIMIT) == b"abc" * 4 + b"x"


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
        codecs.snappy_raw_decompress(b"\xff\xff\xff\x7f", 1000)
    # An LZ4 match length of 4 + 15 + 255 * 40: 10 KiB of output from 45 bytes of input.
    block = bytes((0x1F,)) + b"a" + b"\x01\x00" + b"\xff" * 40 + b"\x00"
    assert len(codecs.lz4_decompress(lz4_frame(block), LIMIT)) == 1 + 19 + 255 * 40
    with pytest.raises(CorruptRecordError, match="exceeds"):
        codecs.lz4_decompress(lz4_frame(block), 1000)


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
