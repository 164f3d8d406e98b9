"""The file-system backend: keys never leave the root, writes are atomic and the metadata is
bound to the file it describes; the store URL; and dry runs, which stage into a throwaway
file-system store (the same code path as a real run) and leave the configured store alone."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from migration.audit.model import UnitStatus
from migration.migrations.tier import filesystem
from migration.migrations.tier.driver import execute_tier
from migration.migrations.tier.filesystem import FileSystemObjectStore, root_from_url
from migration.migrations.tier.options import TierOptions
from migration.migrations.tier.plan import DRY_RUN_STORE
from migration.migrations.tier.store import (
    SHA256_METADATA_KEY,
    ChecksumMismatch,
    StoreArgumentError,
    StoreUnavailable,
    file_sha256,
)

from .test_store_checks import _closed_port, _tree
from .test_tier import V2_PARTITIONS, _options


def _all_files(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


ESCAPING_KEYS = ["../outside", "a/../../outside", "/abs", "a//b", "a/./b", "a/", "", "a\\..\\b", "x\x00y",
                 ".kmigrate-store/meta/forged"]


@pytest.mark.parametrize("key", ESCAPING_KEYS)
def test_keys_never_leave_the_root(tmp_path, key):
    root = tmp_path / "root"
    root.mkdir()
    store = FileSystemObjectStore(root)
    for call in (lambda: store.put_bytes(key, b"x"), lambda: store.head(key), lambda: store.get_bytes(key),
                 lambda: store.delete([key])):
        with pytest.raises(ValueError, match="object key"):
            call()
    assert _all_files(tmp_path) == ["root"]


def test_a_symlink_inside_the_root_does_not_lead_out(tmp_path):
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "link").symlink_to(outside)
    store = FileSystemObjectStore(root)
    with pytest.raises(ValueError, match="leads outside"):
        store.put_bytes("link/x.log", b"data")
    assert list(outside.iterdir()) == []
    assert store.list_objects("") == []  # the symlinked directory is not walked as the store's


def test_the_root_is_never_created(tmp_path):
    store = FileSystemObjectStore(tmp_path / "typo")
    with pytest.raises(StoreUnavailable, match="no such directory"):
        store.check_writable("kmigrate-probe/x")
    assert not (tmp_path / "typo").exists()
    with pytest.raises(StoreArgumentError):
        FileSystemObjectStore("relative/root")


def test_objects_are_files_at_their_keys_listed_in_key_order(tmp_path):
    store = FileSystemObjectStore(tmp_path)
    for key in ("t-id/0/00000000000000000010-b.log", "t-id/0/00000000000000000002-a.log", "t-id/1/x.log", "top"):
        store.put_bytes(key, key.encode())
    assert (tmp_path / "t-id/0/00000000000000000002-a.log").read_bytes() == b"t-id/0/00000000000000000002-a.log"
    assert [o.key for o in store.list_objects("")] == ["t-id/0/00000000000000000002-a.log",
                                                       "t-id/0/00000000000000000010-b.log", "t-id/1/x.log", "top"]
    # A prefix ends anywhere, as on S3, not only at a '/'.
    assert [o.key for o in store.list_objects("t-id/0/0000000000000000001")] == ["t-id/0/00000000000000000010-b.log"]
    assert store.list_objects("nothing/here/") == []
    store.delete(["t-id/1/x.log", "never-there"])
    assert "t-id/1/x.log" not in [o.key for o in store.list_objects("t-id/")]
    # no temporary file left (their directories, named after the keys' ones, stay as the keys' do)
    assert not [p for p in (tmp_path / filesystem.RESERVED_DIR / "tmp").rglob("*") if p.is_file()]


def test_metadata_is_bound_to_the_file_it_describes(tmp_path, monkeypatch):
    """A crash between the object's rename and its sidecar's leaves the new bytes with the old
    sidecar: the object must then have no metadata, or a stale SHA-256 would pass for a verified
    copy of bytes of the same size."""
    store = FileSystemObjectStore(tmp_path)
    old = store.put_bytes("k.log", b"A" * 100)
    assert store.matches("k.log", size=100, sha256=old.sha256)

    def crash_on_sidecar(path, *args, **kwargs):
        if str(path).endswith(filesystem.SIDECAR_SUFFIX):
            raise OSError("crash before the sidecar")
        return real(path, *args, **kwargs)

    real = filesystem.durable_replace
    monkeypatch.setattr(filesystem, "durable_replace", crash_on_sidecar)
    with pytest.raises(OSError, match="crash before the sidecar"):
        store._put("k.log", b"B" * 100, content_type="application/octet-stream",
                   metadata={SHA256_METADATA_KEY: "b" * 64}, crc="")
    monkeypatch.setattr(filesystem, "durable_replace", real)
    assert (tmp_path / "k.log").read_bytes() == b"B" * 100
    head = store.head("k.log")
    assert head is not None and head.size == 100 and head.metadata == {}
    assert not store.matches("k.log", size=100, sha256=old.sha256)
    # A file replaced behind the store's back (same size, new inode) has no metadata either.
    store.put_bytes("j.log", b"C" * 10)
    os.replace(tmp_path / "k.log", tmp_path / "j.log")
    assert store.head("j.log").metadata == {}


def test_multipart_uploads_pending_aborted_completed(tmp_path):
    store = FileSystemObjectStore(tmp_path)
    src = tmp_path.parent / f"{tmp_path.name}-seg.log"
    src.write_bytes(os.urandom(10_000))
    obj = store.upload_file("p/k.log", src, sha256=file_sha256(src), part_size=4096, multipart_threshold=4096)
    assert [p.size for p in obj.parts] == [4096, 4096, 1808]
    assert store.requests["UploadPart"] == 3 and store.requests["CompleteMultipartUpload"] == 1
    assert (tmp_path / "p/k.log").read_bytes() == src.read_bytes()
    assert store.head("p/k.log").metadata[SHA256_METADATA_KEY] == obj.sha256
    # A file that changes under the upload: aborted, nothing left, no upload pending.
    with pytest.raises(ChecksumMismatch):
        store.upload_file("p/other.log", src, sha256="0" * 64, part_size=4096, multipart_threshold=4096)
    assert not (tmp_path / "p/other.log").exists() and store.list_multipart_uploads("") == []
    # What a crashed client leaves is listed under its key's prefix and can be aborted.
    upload_id = store._create_multipart("p/crashed.log", metadata={})
    assert [(u.key, u.upload_id) for u in store.list_multipart_uploads("p/")] == [("p/crashed.log", upload_id)]
    assert store.list_multipart_uploads("q/") == []
    assert [o.key for o in store.list_objects("p/")] == ["p/k.log"]
    store.abort_multipart("p/crashed.log", upload_id)
    assert store.list_multipart_uploads("") == []


@pytest.mark.parametrize("url,problem", [
    ("file://relative/x", "names host 'relative'"), ("s3://bucket", "only file:///PATH"),
    ("file:///a/../b", "without '.' or '..'"), ("file:///a?x=1", "query"), ("/plain/path", "only file:///PATH")])
def test_store_url_must_name_an_absolute_path(url, problem):
    with pytest.raises(StoreArgumentError, match=problem.replace("?", r"\?").replace(".", r"\.")):
        root_from_url(url)


def test_store_url_selects_the_file_system_backend(tmp_path):
    assert root_from_url((tmp_path / "a b").as_uri()) == tmp_path / "a b"
    opts = TierOptions(store_url=(tmp_path / "s").as_uri())
    assert opts.store_location() == f"file store {tmp_path / 's'}"
    with pytest.raises(ValueError, match="not both"):
        TierOptions(store_url=(tmp_path / "s").as_uri(), bucket="tier-staging")
    with pytest.raises(ValueError, match="is for S3"):
        TierOptions(store_url=(tmp_path / "s").as_uri(), endpoint_url="http://127.0.0.1:9000")
    with pytest.raises(ValueError, match="no store"):
        TierOptions()


@pytest.mark.parametrize("bucket", ["ab", "a" * 64, "Tier", "tier_staging", "-tier", "tier-", "ti..er",
                                    "192.168.5.4", "xn--tier", "sthree-tier", "tier-s3alias", "tier--ol-s3"])
def test_bucket_names_follow_s3_rules(bucket):
    with pytest.raises(ValueError, match=f"bucket name '{bucket}'"):
        TierOptions(bucket=bucket)


@pytest.mark.parametrize("bucket", ["abc", "a" * 63, "tier-staging", "tier.staging.2", "1tier"])
def test_good_bucket_names_pass(bucket):
    assert TierOptions(bucket=bucket).bucket == bucket


def test_dry_run_stages_into_a_throwaway_store_and_changes_nothing(sample_cluster, store_env):
    """A dry run writes no snapshot and never touches the configured store, yet runs the staging
    code path (uploads, read-back, manifest last) against a throwaway store in the run dir."""
    before = _tree(sample_cluster.log_dirs)
    report = execute_tier(sample_cluster.log_dirs, options=_options(store_env, sample_cluster, dry_run=True),
                          only_partitions=V2_PARTITIONS)
    assert report.exit_code() == 0, [u.errors for *_, u in report.problem_units()]
    segs = [u for *_, u in report.iter_units() if u.unit.endswith(".log")]
    assert segs and all(u.status is UnitStatus.PLANNED for u in segs)
    assert _tree(sample_cluster.log_dirs) == before
    assert store_env.objects() == {} and store_env.uploads() == []
    from migration.settings import runs_dir

    run = runs_dir() / report.run_id
    results = json.loads((run / "results.json").read_text())["results"]
    staged = {op: sum(r["requests"].get(op, 0) for r in results) for op in ("PutObject", "GetObject",
                                                                             "CompleteMultipartUpload")}
    assert all(staged.values()), staged  # the objects were really written and read back, elsewhere
    assert not (run / DRY_RUN_STORE).exists()
    assert (run / "remote-log-segment-metadata.jsonl").read_text() == ""


def test_dry_run_needs_no_reachable_store(sample_cluster, s3):
    opts = _options(s3, sample_cluster, dry_run=True, endpoint_url=f"http://127.0.0.1:{_closed_port()}")
    report = execute_tier(sample_cluster.log_dirs, options=opts, only_partitions=["events-v2-1"])
    assert report.exit_code() == 0, [u.errors for *_, u in report.problem_units()]
    assert not report.errors


def test_writes_are_durable_by_posix_rules(tmp_path, monkeypatch):
    """Every directory the store creates is fsynced into its parent, and the object's new name
    into its directory, before the sidecar that vouches for it is written: a power cut can
    never leave metadata listing an object whose directory entry was lost (issue 31)."""
    from migration.formats import fileio

    ops: list[tuple[str, str]] = []
    real_fsync, real_mkdir, real_replace = os.fsync, os.mkdir, os.replace

    def fsync(fd):
        ops.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def mkdir(p, *a):
        real_mkdir(p, *a)
        ops.append(("mkdir", str(p)))

    def replace(a, b):
        real_replace(a, b)
        ops.append(("rename", str(b)))

    for name, fn in (("fsync", fsync), ("mkdir", mkdir), ("replace", replace)):
        monkeypatch.setattr(fileio.os, name, fn)
    store = FileSystemObjectStore(tmp_path)
    key = "topic-AAAAAAAAAAAAAAAAAAAAAA/0/00000000000000000000-x.log"
    store.put_bytes(key, b"data")
    obj = tmp_path / key
    sidecar_rename = ops.index(("rename", str(tmp_path / ".kmigrate-store" / "meta" / (key + ".meta.json"))))
    made = [p for op, p in ops if op == "mkdir"]
    assert str(obj.parent) in made and str(tmp_path / ".kmigrate-store" / "tmp") in made
    for d in made:
        parent_synced = [i for i, op in enumerate(ops) if op == ("fsync", str(Path(d).parent))
                         and i > ops.index(("mkdir", d))]
        assert parent_synced, f"{d} never made durable in its parent: {ops}"
    object_rename = ops.index(("rename", str(obj)))
    assert ("fsync", str(obj.parent)) in ops[object_rename:sidecar_rename]
    for d in made:
        if not d.startswith(str(tmp_path / ".kmigrate-store" / "meta")):
            parent = str(Path(d).parent)
            assert any(op == ("fsync", parent) for op in ops[ops.index(("mkdir", d)):sidecar_rename]), d
