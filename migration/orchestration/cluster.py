"""The cluster description: which brokers and controllers to migrate and where their log
dirs are. YAML or JSON, validated by pydantic; DAGs read it from a param or a Variable."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, model_validator

from migration.formats.errors import KafkaFormatError
from migration.formats.meta_properties import MetaProperties
from migration.formats.names import META_PROPERTIES_FILE

Role = Literal["broker", "controller"]


class WrongHost(RuntimeError):
    """A node's task runs on a host that does not hold that node's log dirs."""


def _broker() -> list[Role]:
    return ["broker"]


class NodeSpec(BaseModel):
    id: int
    roles: list[Role] = Field(default_factory=_broker)
    log_dirs: list[str] = Field(default_factory=list)
    metadata_log_dir: str | None = None
    queue: str | None = Field(default=None, description="Airflow (Celery) queue of a worker on this node's host: "
                              "the tasks that read or write its log dirs are sent there (docs/operations.md, "
                              "\"One worker per broker host\"); none: Airflow's default queue")
    host: str = "localhost"
    stop: list[str] = Field(default_factory=list, description="Command (argv) that stops this broker, e.g. "
                            "[systemctl, stop, kafka]: the upgrade DAG's window runs it after the prestage; "
                            "empty: the DAG waits for the operator to stop the broker")
    start: list[str] = Field(default_factory=list, description="Command (argv) that starts this broker again "
                             "after its window; empty: the DAG says the operator starts it")

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    def check_on_this_host(self, log_dirs: list[str] | None = None) -> None:
        """Refuse to run a task of this node where its log dirs are not: one missing here, or one
        whose meta.properties names another node (the same path on another broker's host: a
        task sent to the wrong queue would stop or rewrite the wrong broker)."""
        where = f"this host ({socket.gethostname()})"
        why = (f"node {self.id}'s tasks belong on its queue ({self.queue!r}), which the kmigrate cluster policy "
               "routes them to (docs/operations.md, \"One worker per broker host\")" if self.queue else
               f"node {self.id} names no queue: every worker of the default queue must reach its log dirs")
        for d in log_dirs if log_dirs is not None else self.all_dirs():
            if not Path(d).is_dir():
                raise WrongHost(f"node {self.id}'s log dir {d} is not on {where}: {why}")
            try:
                owner = MetaProperties.read(Path(d) / META_PROPERTIES_FILE).node_id
            except (OSError, ValueError, KafkaFormatError):
                continue  # none yet, or unreadable: the preflight's validation reports what is wrong
            if owner is not None and owner != self.id:
                raise WrongHost(f"log dir {d} on {where} belongs to node {owner} (its {META_PROPERTIES_FILE}), "
                                f"not node {self.id}: {why}")

    def all_dirs(self) -> list[str]:
        dirs = list(self.log_dirs)
        if self.metadata_log_dir and self.metadata_log_dir not in dirs:
            dirs.append(self.metadata_log_dir)
        return dirs


Migration = Literal["upgrade", "tier"]


def _all_migrations() -> list[Migration]:
    return ["upgrade", "tier"]


class TopicExclusion(BaseModel):
    topic: str = Field(min_length=1)
    migrations: list[Migration] = Field(default_factory=_all_migrations)
    reason: str = "excluded by the operator"

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, data: Any) -> Any:
        return {"topic": data} if isinstance(data, str) else data


class ClusterDescription(BaseModel):
    version: Literal[1] = 1
    name: str = "kafka"
    cluster_id: str | None = None
    nodes: list[NodeSpec]
    compacted_topics: list[str] = Field(default_factory=list)
    excluded_topics: list[TopicExclusion] = Field(
        default_factory=list, description="Topics the operator keeps out of migrations: reported ineligible with "
        "their reason, never a failure. A plain topic name keeps it out of every migration.")
    topic_configs: dict[str, dict[str, str]] = Field(default_factory=dict)
    spark_on_yarn: bool = Field(default=False, description="The DAGs' Spark jobs go to YARN: only then may the "
                                "spark_default connection's master be yarn (else the DAG's first task refuses)")

    @model_validator(mode="after")
    def _unique_ids(self) -> ClusterDescription:
        ids = [n.id for n in self.nodes]
        if len(ids) != len(set(ids)):
            raise ValueError(f"node ids must be unique: {ids}")
        return self

    @property
    def brokers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controllers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_controller]

    def node(self, node_id: int) -> NodeSpec:
        for n in self.nodes:
            if n.id == node_id:
                return n
        raise KeyError(f"no node {node_id} in the cluster description (known: {[n.id for n in self.nodes]})")

    def exclusions(self, migration: Migration) -> dict[str, str]:
        """Topic -> the operator's reason, for the topics kept out of ``migration``."""
        return {e.topic: e.reason for e in self.excluded_topics if migration in e.migrations}

    def is_compacted(self, topic: str) -> bool:
        if topic in self.compacted_topics:
            return True
        policy = self.topic_configs.get(topic, {}).get("cleanup.policy", "delete")
        return "compact" in policy

    @classmethod
    def load(cls, path: str | Path) -> ClusterDescription:
        text = Path(path).read_text()
        data = json.loads(text) if str(path).endswith(".json") else yaml.safe_load(text)
        return cls.model_validate(data)

    def dump(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.model_dump(mode="json"), indent=2) + "\n")
