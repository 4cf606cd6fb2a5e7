"""Pure codecs: encoded file URIs, partition names, checksum tokens, event messages."""

from __future__ import annotations

import io

import google_crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hmsrepl.formats.file_uri import EncodedFileUri, split_versioned_reference, versioned_reference
from hmsrepl.formats.partition_names import (
    escape_path_name,
    make_partition_name,
    parse_partition_name,
    unescape_path_name,
)
from hmsrepl.metastore.events import decode_message, encode_message
from hmsrepl.storage.checksum import checksum_bytes, checksum_stream, parse_checksum_token
from hmsrepl.storage.local import local_path

no_hash = st.text(alphabet=st.characters(blacklist_characters="#", blacklist_categories=("Cs",)))


@given(st.builds(EncodedFileUri, no_hash.filter(bool), no_hash, no_hash, no_hash))
def test_file_uri_round_trip(entry: EncodedFileUri) -> None:
    assert EncodedFileUri.decode(entry.encode()) == entry


def test_file_uri_hive_layout_and_dropped_trailing_parts() -> None:
    entry = EncodedFileUri("s3://b/t/p=1/f", "crc32c-0000abcd-3", "s3://b/cm", "delta_0000001_0000001_0000")
    assert entry.encode() == "s3://b/t/p=1/f#crc32c-0000abcd-3#s3://b/cm#delta_0000001_0000001_0000"
    assert EncodedFileUri.decode("file:/w/f#c1") == EncodedFileUri("file:/w/f", "c1", "", "")
    with pytest.raises(ValueError, match="malformed file URI"):
        EncodedFileUri.decode("a#b#c#d#e#f")  # a fifth part (version id) is valid; a sixth is not
    with pytest.raises(ValueError, match="contains '#'"):
        EncodedFileUri("a#b").encode()


# Version ids are opaque; real S3 ones hold '/' and '+', and nothing stops '#', '@', '%' or '?'.
version_ids = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1)


@given(st.builds(EncodedFileUri, no_hash.filter(bool), no_hash, no_hash, no_hash, version_ids))
def test_file_uri_with_version_round_trip(entry: EncodedFileUri) -> None:
    text = entry.encode()
    assert text.count("#") == 4  # the id is percent-encoded: it never adds a separator
    assert EncodedFileUri.decode(text) == entry


def test_file_uri_version_is_an_optional_fifth_part() -> None:
    plain = EncodedFileUri("s3://b/t/f", "crc32c-0000abcd-3", "s3://b/cm", "")
    assert plain.encode() == "s3://b/t/f#crc32c-0000abcd-3#s3://b/cm#"  # Hive's four parts, unchanged
    versioned = EncodedFileUri("s3://b/t/f", "crc32c-0000abcd-3", "s3://b/cm", "", "3/L4kq+tJ#x")
    assert versioned.encode() == "s3://b/t/f#crc32c-0000abcd-3#s3://b/cm##3%2FL4kq%2BtJ%23x"
    # What Hive's decoder keeps (the first four '#'-parts) is exactly the unversioned entry.
    assert versioned.encode().split("#")[:4] == plain.encode().split("#")
    assert EncodedFileUri.decode("s3://b/k#c#cm#sub#v1").version_id == "v1"
    assert EncodedFileUri.decode("s3://b/k#c").version_id == ""
    assert versioned.file_name == "f" and versioned.file_uri == "s3://b/t/f"


def test_versioned_reference_is_unambiguous_for_any_key() -> None:
    # '?' and '@' are legal in keys and '%3A' must never be decoded: the key stays byte for byte.
    key_uri = "s3://bucket/t/p=k%3Av/odd?versionId=x@y.parquet"
    reference = versioned_reference(key_uri, "3/L4kq+t@J")
    assert reference == "s3://3%2FL4kq%2Bt%40J@bucket/t/p=k%3Av/odd?versionId=x@y.parquet"
    assert split_versioned_reference(reference) == (key_uri, "3/L4kq+t@J")
    assert split_versioned_reference(key_uri) == (key_uri, None)  # a plain URI stays plain
    assert versioned_reference(key_uri, None) == key_uri
    assert split_versioned_reference("/local/p=a@b/f") == ("/local/p=a@b/f", None)
    assert split_versioned_reference("s3://b") == ("s3://b", None)
    entry = EncodedFileUri("s3://bucket/t/f", "c", "", "", "v+1")
    assert entry.versioned_uri == "s3://v%2B1@bucket/t/f"
    assert EncodedFileUri("s3://bucket/t/f").versioned_uri == "s3://bucket/t/f"
    with pytest.raises(ValueError, match="cannot pin a version"):
        versioned_reference("/local/f", "v1")


@given(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1).filter(lambda k: "/" not in k),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",))),
    version_ids,
)
def test_versioned_reference_round_trip(bucket_suffix: str, key: str, version_id: str) -> None:
    # Bucket names never hold '@' or '/'; keys may hold anything.
    bucket = "b" + bucket_suffix.replace("@", "")
    uri = f"s3://{bucket}/{key}"
    assert split_versioned_reference(versioned_reference(uri, version_id)) == (uri, version_id)


def test_partition_names_escape_like_hive() -> None:
    assert make_partition_name(["P", "q"], ["k:v", "a/b"]) == "p=k%3Av/q=a%2Fb"
    assert escape_path_name("") == "__HIVE_DEFAULT_PARTITION__"
    assert escape_path_name("50%") == "50%25"
    assert parse_partition_name("p=k%3Av/q=a%2Fb") == [("p", "k:v"), ("q", "a/b")]
    with pytest.raises(ValueError, match="has 1 values but the table has 2 keys"):
        make_partition_name(["a", "b"], ["1"])
    with pytest.raises(ValueError, match="not 'key=value'"):
        parse_partition_name("p=1/oops")


@given(st.text(min_size=1))
def test_escape_round_trip(value: str) -> None:
    escaped = escape_path_name(value)
    assert "/" not in escaped and ":" not in escaped and "=" not in escaped
    assert unescape_path_name(escaped) == value


def test_local_paths_are_never_url_decoded() -> None:
    assert local_path("file:/w/t/p=k%3Av") == "/w/t/p=k%3Av"
    assert local_path("file:///w/t/p=k%3Av") == "/w/t/p=k%3Av"
    assert local_path("file://localhost/w/x") == "/w/x"
    assert local_path("/plain/p=a%20b") == "/plain/p=a%20b"


@given(st.binary(max_size=20000))
def test_checksum_is_crc32c_and_size(data: bytes) -> None:
    token = checksum_bytes(data)
    crc, size = parse_checksum_token(token)
    assert size == len(data)
    assert crc == int.from_bytes(google_crc32c.Checksum(data).digest(), "big")
    assert checksum_stream(io.BytesIO(data)) == token


def test_known_crc32c_vector() -> None:
    # RFC 3720's check value for CRC32C over "123456789".
    assert checksum_bytes(b"123456789") == "crc32c-e3069283-9"
    with pytest.raises(ValueError, match="not of the form"):
        parse_checksum_token("md5-abc")


@given(
    # Thrift's widest integer is i64 (json_text: wider ones read back as floats)
    st.dictionaries(
        st.text(max_size=20),
        st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.text(max_size=50),
        max_size=30,
    ),
    st.booleans(),
)
def test_event_message_round_trip(body: dict, compress: bool) -> None:
    text, fmt = encode_message(body, compress=compress, compress_min_bytes=64)
    assert decode_message(text, fmt) == body
    if not compress:
        assert fmt == "json-1"
