"""The real-Kafka tests (marker ``realkafka``): Apache Kafka itself loads, recovers and serves
what kmigrate wrote (tests/support/kafka.py; docs/testing.md, "Apache Kafka as the judge")."""

from support.kafka import kafka_node_factory  # noqa: F401 - a fixture, registered by import
