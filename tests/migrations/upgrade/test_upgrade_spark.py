"""The same upgrade through the Spark engine (shared local session): identical to inline."""

from __future__ import annotations

import shutil

import pytest
from conftest import tree_state

from migration.migrations.upgrade.driver import UpgradeOptions, execute_upgrade


def _units(report) -> dict:
    """Unit results without what legitimately differs between runs (durations, paths)."""
    out = {}
    for b, topic, p, u in report.iter_units():
        d = u.model_dump(mode="json", exclude={"duration_s", "path"})
        for w in d["warnings"] + d["errors"]:
            w.pop("file", None)
        out[(b, topic, p, u.unit)] = d
    return out


@pytest.mark.slow
def test_spark_engine_matches_inline(sample_cluster, tmp_path, spark) -> None:
    inline_root = tmp_path / "inline"
    shutil.copytree(sample_cluster.root, inline_root, copy_function=shutil.copy2)
    spark_dirs = [str(d) for d in sample_cluster.log_dirs]
    inline_dirs = [str(inline_root / d.relative_to(sample_cluster.root)) for d in sample_cluster.log_dirs]
    opts = UpgradeOptions(target="v2")
    by_spark = execute_upgrade(spark_dirs, options=opts, engine="spark", spark=spark)
    by_inline = execute_upgrade(inline_dirs, options=opts, engine="inline")
    assert by_spark.exit_code() == 0 and by_spark.totals.units_ok > 0
    assert _units(by_spark) == _units(by_inline)
    for s, i in zip(spark_dirs, inline_dirs, strict=True):
        assert tree_state(s) == tree_state(i)
