"""Fuzz target: KRaft metadata record values (frame version, api key, version, then the
schema-driven flexible body: compact strings and arrays, tagged fields, uuids, nullable
structs). When a decoded value encodes again, that encoding must be a fixed point."""

from __future__ import annotations

import re

from fuzz.harness import Target, attempt
from migration.formats.message_schema import default_registry, redact
from migration.formats.metadata_records import decode_metadata_record, encode_metadata_record, metadata_schema


def run(data: bytes, kind: str) -> None:
    record = attempt(decode_metadata_record, data)
    if record is not None:
        schema = metadata_schema(record.api_key)
        redact(record.fields, schema)
        # Kafka's reader keeps unknown tags as they come, its writer refuses them out of order
        # (RawTaggedFieldWriter): re-encoding may be refused, but what encodes is a fixed point.
        encoded = attempt(encode_metadata_record, record.api_key, record.version, record.fields)
        if encoded is not None:
            again = decode_metadata_record(encoded)
            assert encode_metadata_record(again.api_key, again.version, again.fields) == encoded
    m = re.match(r"(\w+)-v\d+\.", kind)
    if m:  # the body alone, at every version of the seed's schema
        schema = default_registry().get(m.group(1))
        for version in schema.versions:
            attempt(schema.decode, data[3:], version)
            attempt(schema.decode_from, data, 0, version)


def seed_check(data: bytes, name: str) -> None:
    decode_metadata_record(data)


TARGET = Target("metadata_records", run, hot=lambda d: list(range(min(len(d), 8))), quick_examples=1200,
                seed_check=seed_check)


test_corpus, test_fuzz = TARGET.tests()
