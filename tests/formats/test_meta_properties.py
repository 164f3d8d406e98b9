from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from migration.formats.errors import CorruptCheckpointError
from migration.formats.kafka_uuid import Uuid
from migration.formats.meta_properties import (
    MetaProperties,
    java_date,
    load_properties,
    parse_properties,
    store_properties,
)

WHEN = datetime(2026, 11, 22, 2, 31, 19, tzinfo=UTC)
SPEC_EXAMPLE = (
    b"#\n"
    b"#Sun Nov 22 02:31:19 UTC 2026\n"
    b"node.id=1\n"
    b"directory.id=pgnlgjLD8YXlWeoC2hjTkw\n"
    b"version=1\n"
    b"cluster.id=MkU3OEVBNTcwNTJENDM2Qk\n"
)
KRAFT = MetaProperties(1, "MkU3OEVBNTcwNTJENDM2Qk", 1, Uuid.from_string("pgnlgjLD8YXlWeoC2hjTkw"))


def test_spec_example_byte_exact() -> None:
    # Kafka's layout, keys in JDK 17 Properties (hash) order.
    assert KRAFT.to_bytes(now=WHEN) == SPEC_EXAMPLE
    assert MetaProperties.from_bytes(SPEC_EXAMPLE) == KRAFT


def test_sorted_key_order_of_newer_jdks() -> None:
    body = KRAFT.to_bytes(now=WHEN, sort_keys=True).split(b"\n")[2:-1]
    assert body == sorted(body)


def test_java_date() -> None:
    assert java_date(WHEN) == "Sun Nov 22 02:31:19 UTC 2026"
    assert java_date(datetime(2024, 3, 5, 7, 8, 9, tzinfo=UTC)) == "Tue Mar 05 07:08:09 UTC 2024"


def test_zookeeper_versions() -> None:
    v0 = MetaProperties.from_bytes(b"#\nversion=0\nbroker.id=7\ncluster.id=abc\n")
    assert (v0.version, v0.node_id, v0.cluster_id, v0.directory_id) == (0, 7, "abc", None)
    # No version key: version 0; broker.id optional; node.id ignored in version 0.
    v0 = MetaProperties.from_bytes(b"node.id=3\n")
    assert (v0.version, v0.node_id, v0.cluster_id) == (0, None, None)
    assert MetaProperties(0, None, 5).to_properties() == {"version": "0", "broker.id": "5"}
    assert MetaProperties.from_bytes(MetaProperties(0, "c", 5).to_bytes()) == MetaProperties(0, "c", 5)


@pytest.mark.parametrize(
    ("data", "position"),
    [
        (b"version=2\nnode.id=1\ncluster.id=x\n", 0),
        (b"version=one\n", 0),
        (b"version=1\ncluster.id=x\n", None),  # node.id required
        (b"version=1\nnode.id=1\n", None),  # cluster.id required
        (b"version=1\ncluster.id=x\nnode.id=1x\n", 23),
        (b"version=0\nbroker.id=\n", 10),
        (b"version=0\nbroker.id=2147483648\n", 10),
        (b"version=0\n\ndirectory.id=short\n", 11),
        (b"a=b\nkey=\\u00zz\n", 4),  # malformed \uxxxx
    ],
)
def test_bad_files(data: bytes, position: int | None) -> None:
    with pytest.raises(CorruptCheckpointError) as e:
        MetaProperties.from_bytes(data, path="/logs/meta.properties")
    assert e.value.path == "/logs/meta.properties"
    assert e.value.position == position


def test_properties_grammar() -> None:
    data = (
        b"# comment\n"
        b"  ! another comment \\\n"
        b"a=1\n"
        b"b : 2\n"
        b"c    3\n"
        b"d\n"
        b"e=\\\n"
        b"    continued \\\n"
        b"  twice\n"
        b"f\\ g=h\\=i\\:j\n"
        b"t=\\t\\n\\r\\f\\q\\\\\n"
        b"u=\\u0041\\u00e9\n"
        b"latin=caf\xe9\n"
        b"crlf=x\r\n"
        b"cr=y\r"
        b"   \n"
        b"k==v\n"
        b"end=z\\"
    )
    assert load_properties(data) == {
        "a": "1",
        "b": "2",
        "c": "3",
        "d": "",
        "e": "continued twice",
        "f g": "h=i:j",
        "t": "\t\n\r\fq\\",
        "u": "Aé",
        "latin": "café",
        "crlf": "x",
        "cr": "y",
        "k": "=v",
        "end": "z",
    }


def test_comment_line_cannot_continue_and_positions() -> None:
    props = parse_properties(b"#x\\\na=1\n  b=2\n")
    assert [(p.key, p.position) for p in props] == [("a", 4), ("b", 10)]


def test_continuation_before_empty_line_ends_the_value() -> None:
    assert load_properties(b"a=b\\\n\nc=d\n") == {"a": "b", "c": "d"}


def test_continuation_line_starting_with_hash_is_not_a_comment() -> None:
    assert load_properties(b"a=b\\\n  #c\n") == {"a": "b#c"}


text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=15)


@given(st.dictionaries(text, text, max_size=6))
def test_store_load_round_trip(props: dict[str, str]) -> None:
    data = store_properties(props, now=WHEN)
    assert data.isascii()
    assert load_properties(data) == props


@given(
    st.sampled_from([0, 1]),
    st.integers(-(2**31), 2**31 - 1),
    st.from_regex(r"\A[A-Za-z0-9_-]{1,30}\Z"),
    st.one_of(st.none(), st.builds(Uuid, st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1))),
)
def test_meta_round_trip(version: int, node: int, cluster: str, directory: Uuid | None) -> None:
    m = MetaProperties(version, cluster, node, directory)
    assert MetaProperties.from_bytes(m.to_bytes()) == m


def test_constructor_rules() -> None:
    with pytest.raises(ValueError):
        MetaProperties(2)
    with pytest.raises(ValueError):
        MetaProperties(1, "c")
    with pytest.raises(ValueError):
        store_properties({}, comment="two\nlines")


def test_write_and_read(tmp_path: Path) -> None:
    path = tmp_path / "meta.properties"
    KRAFT.write(path, now=WHEN)
    assert path.read_bytes() == SPEC_EXAMPLE
    assert MetaProperties.read(path) == KRAFT
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.properties"]


@pytest.mark.parametrize(
    "data",
    [
        b"version=0\nbroker.id=" + b"1" * 5000 + b"\n",
        b"version=" + b"1" * 5000 + b"\n",
        b"version=1\ncluster.id=x\nnode.id=" + b"0" * 5000 + b"12345678901\n",
        b"version=1\ncluster.id=x\nnode.id=5\\n\n",  # an escaped line break: Integer.parseInt refuses it
    ],
)
def test_unreadable_numbers_are_format_errors(data: bytes) -> None:
    # Found by tests/fuzz: int() raised ValueError (its 4300-digit limit) out of the reader.
    with pytest.raises(CorruptCheckpointError, match="version|base-10"):
        MetaProperties.from_bytes(data, path="/logs/meta.properties")


def test_node_id_with_leading_zeros_reads_as_in_java() -> None:
    data = b"version=1\ncluster.id=x\nnode.id=" + b"0" * 5000 + b"12\n"
    assert MetaProperties.from_bytes(data).node_id == 12
