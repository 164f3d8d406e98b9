"""Tables of the session store (SQLAlchemy Core; portable to SQLite and PostgreSQL).

Times are integer milliseconds since the epoch, UTC: comparable with ``<`` on every backend and
free of SQLite's timezone-less DATETIME strings.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Column, Integer, MetaData, String, Table, Text

metadata = MetaData()

# One row per (name, broker): the session proper. ``epoch`` is the epoch of the last committed
# run (0: none yet); ``next_seq`` hands out rotation positions to partitions.
session_table = Table(
    "migration_session",
    metadata,
    Column("name", String(250), primary_key=True),
    Column("broker_id", Integer, primary_key=True, autoincrement=False),
    Column("session_id", String(32), nullable=False, unique=True),
    Column("epoch", BigInteger, nullable=False),
    Column("next_seq", BigInteger, nullable=False),
    Column("partitions", Integer, nullable=False),
    Column("created_at_ms", BigInteger, nullable=False),
    Column("last_used_at_ms", BigInteger, nullable=False, index=True),
)

# Per partition: what the last ok run saw (seen_* NULL: nothing trusted, the partition is dirty),
# what the last run that served it did, and its place in the rotation (``seq``, lower first).
partition_table = Table(
    "migration_session_partition",
    metadata,
    Column("session_id", String(32), primary_key=True),
    Column("topic", String(255), primary_key=True),
    Column("partition", Integer, primary_key=True, autoincrement=False),
    Column("log_dir", String(1024), primary_key=True),
    Column("seq", BigInteger, nullable=False),
    Column("seen_digest", String(64)),
    Column("seen_bases_digest", String(64)),
    Column("seen_segments_digest", String(64)),
    Column("seen_files_digest", String(64)),
    Column("seen_log_start_offset", BigInteger),
    Column("seen_log_end_offset", BigInteger),
    Column("outcome", String(16)),
    Column("outcome_reason", Text),
    Column("outcome_run_id", String(250)),
    Column("outcome_epoch", BigInteger),
    Column("failures", Integer, nullable=False),
    Column("updated_at_ms", BigInteger, nullable=False),
)

# At most one live run per (name, broker). A row whose expiry has passed belongs to a crashed run
# and may be taken over. Sessionless runs hold a lease too (session_id NULL).
lease_table = Table(
    "migration_session_lease",
    metadata,
    Column("name", String(250), primary_key=True),
    Column("broker_id", Integer, primary_key=True, autoincrement=False),
    Column("run_id", String(250), nullable=False),
    Column("token", String(32), nullable=False),  # tells two attempts of one run id apart
    Column("session_id", String(32)),
    Column("started_at_ms", BigInteger, nullable=False),
    Column("expires_at_ms", BigInteger, nullable=False),
)
