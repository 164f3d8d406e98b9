"""Every DAG reads its params one way, into a typed model whose migration options are the
CLI's own options model (same fields, same defaults, the DAG's dry_run aside)."""

from __future__ import annotations

import pytest

from migration.migrations.upgrade.options import UpgradeOptions
from migration.orchestration.common import dag_params
from migration.orchestration.tiered_schedule import TierParams
from migration.orchestration.unify_flow import UnifyDagParams
from migration.orchestration.upgrade_rollout import UpgradeDagParams, plan_rollout


def test_empty_form_fields_take_the_defaults_and_bad_values_name_the_param():
    p = dag_params(UpgradeDagParams, {"target_format": "v1", "canary_broker": None, "brokers": [], "force": ""})
    assert (p.target_format, p.canary_broker, p.force, p.dry_run) == ("v1", None, False, True)
    with pytest.raises(ValueError, match="DAG param target_format"):
        dag_params(UpgradeDagParams, {"target_format": "v3"})
    with pytest.raises(ValueError, match="DAG param dry_run"):
        dag_params(UnifyDagParams, {"dry_run": "perhaps"})
    with pytest.raises(ValueError, match="DAG param bucket"):
        dag_params(TierParams, {})


def test_the_rollout_carries_the_clis_options_model(sample_cluster):
    plan = plan_rollout({"cluster": str(sample_cluster.description_path), "target_format": "v2",
                         "assign_leader_epoch": True, "dry_run": False})
    assert isinstance(plan.options, UpgradeOptions)
    cli_defaults = UpgradeOptions(target="v2")
    for field in ("stamp_v0_with_mtime", "force", "segment_bytes", "max_message_bytes", "index_interval_bytes"):
        assert getattr(plan.options, field) == getattr(cli_defaults, field), field
    assert plan.options.assign_leader_epoch and not plan.options.dry_run
    assert plan.options.excluded_topics == sample_cluster.description.exclusions("upgrade")
    with pytest.raises(ValueError, match="needs --to v2"):
        plan_rollout({"cluster": str(sample_cluster.description_path), "target_format": "v1",
                      "assign_leader_epoch": True})
