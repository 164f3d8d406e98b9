"""The cluster description's node: where its tasks may run (``NodeSpec.check_on_this_host``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from migration.formats.meta_properties import MetaProperties
from migration.orchestration.cluster import NodeSpec, WrongHost


def _log_dir(root: Path, meta: MetaProperties | None) -> Path:
    root.mkdir(parents=True)
    if meta is not None:
        (root / "meta.properties").write_bytes(meta.to_bytes())
    return root


def test_a_node_runs_where_its_log_dirs_are_and_name_it(tmp_path):
    kraft = _log_dir(tmp_path / "a", MetaProperties(1, cluster_id="q1Sh-9_ISia_zwGINzRvyQ", node_id=2))
    zk = _log_dir(tmp_path / "b", MetaProperties(0, node_id=2))  # broker.id of a ZooKeeper-era broker
    fresh = _log_dir(tmp_path / "c", None)  # no meta.properties: the validation says what is wrong
    NodeSpec(id=2, log_dirs=[str(kraft), str(zk), str(fresh)], queue="kafka-host-2").check_on_this_host()


def test_a_log_dir_of_another_node_is_refused(tmp_path):
    """The same path on another broker's host: a task sent to the wrong queue must not stop or
    rewrite that broker."""
    other = _log_dir(tmp_path / "kafka-logs", MetaProperties(1, cluster_id="q1Sh-9_ISia_zwGINzRvyQ", node_id=3))
    with pytest.raises(WrongHost, match=r"belongs to node 3 \(its meta.properties\), not node 2: node 2's tasks "
                                        r"belong on its queue \('kafka-host-2'\)"):
        NodeSpec(id=2, log_dirs=[str(other)], queue="kafka-host-2").check_on_this_host()


def test_a_log_dir_missing_here_is_refused(tmp_path):
    with pytest.raises(WrongHost, match=r"node 2's log dir .*/gone is not on this host .*names no queue"):
        NodeSpec(id=2, log_dirs=[str(tmp_path / "gone")]).check_on_this_host()


def test_each_broker_step_of_the_rollout_checks_its_host(sample_cluster):
    """A description whose brokers' log dirs are swapped (or a worker of the wrong queue) is
    refused before the step touches anything."""
    import json

    from migration.orchestration import upgrade_rollout as rollout

    params = {"cluster": str(sample_cluster.description_path), "dry_run": False, "canary_broker": 1}
    plan = rollout.plan_rollout(params)
    for b in (1, 2, 3):
        rollout.check_broker_host(plan, b)
    desc = json.loads(sample_cluster.description_path.read_text())
    nodes = {n["id"]: n for n in desc["nodes"]}
    nodes[1]["log_dirs"], nodes[2]["log_dirs"] = nodes[2]["log_dirs"], nodes[1]["log_dirs"]
    nodes[1]["queue"] = "kafka-host-1"
    sample_cluster.description_path.write_text(json.dumps(desc))
    swapped = rollout.plan_rollout(params)
    with pytest.raises(WrongHost, match=r"belongs to node 2 .*, not node 1: node 1's tasks belong on its queue"):
        rollout.check_broker_host(swapped, 1)
    rollout.check_broker_host(swapped, 3)
