"""The incremental session store: KIP-227 fetch sessions, applied to scheduled migration runs.

A session belongs to one (name, broker id) pair, where name is the DAG or command name. It has a
random session id and an epoch: the epoch of the last committed run, advanced by ``finish_run``.
Each run is planned by ``begin_run`` (take the lease, decide dirty partitions and the order) and
committed by ``finish_run`` (record outcomes and fingerprints, rotate, bump the epoch, release the
lease) or dropped by ``abandon_run`` (release the lease, state untouched).

Epoch rule. The caller passes the epoch it believes the session is at (the ``epoch`` of the
previous run's plan or report), or ``None`` if it does not know. The run is incremental only if
the session exists, has a committed run, and ``believed_epoch`` equals the stored epoch.
Otherwise (no session, evicted session, no committed run, unknown or different epoch: lost state,
a database restored from backup, a concurrent run that committed first) the run is a *full
rescan*: every partition is dirty and no stored fingerprint is trusted. The new epoch is
``max(stored, believed or 0) + 1``, so it grows by one per run and never goes back to a number a
caller may already hold (after a restore the stored epoch is behind the callers').

Lease rule. ``begin_run`` inserts a lease row for (name, broker) holding the run id, start time
and expiry (``lease_ttl``). A second ``begin_run`` while that lease is live raises
:class:`SessionBusyError` naming the holder; an expired lease (a crashed run) is taken over. The
same run id may take over its own live lease (an Airflow retry of a crashed attempt).
``finish_run`` refuses (``StaleRunError``) if another run now holds the lease or the session moved
on; nothing is then recorded and the next run redoes the work, which is safe.

Slots. At most ``slot_limit`` sessions exist. A new session evicts the least recently used one
that no live run holds; if every slot is held by a running session, the run is *sessionless*:
``session_id`` is ``None``, ``epoch`` is 0, every partition is selected as in a full rescan (the
budget still applies), ``finish_run`` records nothing and only releases the lease, and the next
run tries again to get a slot. Sessions unused for ``idle_eviction`` are evicted by ``begin_run``
and ``evict_idle``.

Every change of state is one database transaction, so a crash mid-commit leaves the previous state.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    case,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
)
from sqlalchemy import update as sa_update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError

from migration.formats.fileio import durable_mkdir
from migration.sessions.errors import SessionBusyError, StaleRunError
from migration.sessions.fingerprint import PartitionFingerprint
from migration.sessions.models import (
    Budget,
    Cost,
    Outcome,
    OutcomeStatus,
    PartitionKey,
    PlannedPartition,
    RunPlan,
    SessionInfo,
)
from migration.sessions.planner import StoredPartition, plan_partitions
from migration.sessions.schema import lease_table, metadata, partition_table, session_table
from migration.settings import ENV_SESSIONS_URL, sessions_db


class _LeaseRaceError(Exception):
    """The expired lease we meant to take over changed under us."""


def default_store_url() -> str:
    """``$KMIGRATE_SESSIONS_URL`` if set, else SQLite at ``<home>/state/sessions.sqlite`` (the
    home of ``migration.settings``: docs/operations.md, "Where state lives")."""

    configured = os.environ.get(ENV_SESSIONS_URL)
    if configured:
        return configured
    return f"sqlite:///{sessions_db().resolve()}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _ms(t: datetime) -> int:
    if t.tzinfo is None:
        raise ValueError("session store times must be timezone-aware")
    return int(t.timestamp() * 1000)


def _dt(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


# One PostgreSQL advisory lock serializes the store's transactions ("kmigsess" as an int64).
PG_STORE_LOCK_KEY = 0x6B6D696773657373


def _make_engine(url: str) -> Engine:
    # Every transaction of the store reads, decides and writes (lease holder, epoch, slot count,
    # rotation sequence): its rules hold only if no other store transaction interleaves, so
    # every backend serializes them. PostgreSQL's READ COMMITTED alone would let a late commit
    # and a new run both read epoch N and both write N + 1.
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        pg = create_engine(url, pool_pre_ping=True)

        @event.listens_for(pg, "begin")
        def _serialize(conn: Connection) -> None:
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_STORE_LOCK_KEY})")

        return pg
    if backend != "sqlite":
        raise ValueError(f"session store URL {parsed.render_as_string(hide_password=True)}: only sqlite and "
                         "postgresql are supported (their transactions are serialized)")
    database = parsed.database
    if database and database != ":memory:" and not database.startswith("file:"):
        durable_mkdir(Path(database).parent)
    engine = create_engine(url, connect_args={"timeout": 30})

    # pysqlite's own transaction handling defers BEGIN until the first write, so two runs could
    # both read "no lease" and then race. Take the write lock at BEGIN instead (SQLAlchemy's
    # documented recipe, with IMMEDIATE): every transaction of the store is serialized.
    @event.listens_for(engine, "connect")
    def _no_pysqlite_begin(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None

    @event.listens_for(engine, "begin")
    def _begin_immediate(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


class SessionStore:
    """Incremental session state for scheduled runs, in SQLite (default) or PostgreSQL."""

    def __init__(
        self,
        url: str | None = None,
        *,
        slot_limit: int = 1000,
        idle_eviction: timedelta = timedelta(days=30),
        lease_ttl: timedelta = timedelta(hours=6),
        failed_first_runs: int = 3,
        clock: Callable[[], datetime] = _utc_now,
    ) -> None:
        if slot_limit < 1:
            raise ValueError("slot_limit must be at least 1")
        if lease_ttl <= timedelta(0) or idle_eviction <= timedelta(0):
            raise ValueError("lease_ttl and idle_eviction must be positive")
        self.url = url or default_store_url()
        self.slot_limit = slot_limit
        self.idle_eviction = idle_eviction
        self.lease_ttl = lease_ttl
        self.failed_first_runs = failed_first_runs
        self._clock = clock
        self._engine = _make_engine(self.url)
        metadata.create_all(self._engine, checkfirst=True)

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- runs ---------------------------------------------------------------------------------

    def begin_run(
        self,
        name: str,
        broker_id: int,
        run_id: str,
        *,
        believed_epoch: int | None,
        fingerprints: Sequence[PartitionFingerprint],
        budget: Budget | None = None,
        costs: Mapping[PartitionKey, Cost] | None = None,
    ) -> RunPlan:
        """Take the lease of (name, broker) and plan the run.

        ``fingerprints`` is the session's complete partition set: tracked partitions missing from
        it are listed in ``plan.removed`` and forgotten at ``finish_run``. ``costs`` overrides the
        default per-partition cost (segment bytes and count of the fingerprint).
        """
        if not name or not run_id:
            raise ValueError("name and run_id must be non-empty")
        if believed_epoch is not None and believed_epoch < 0:
            raise ValueError("believed_epoch must be None or >= 0")
        for fp in fingerprints:
            fp.digest()  # hash outside the write transaction, which serializes runs
        now = self._clock()
        now_ms = _ms(now)
        expires_ms = _ms(now + self.lease_ttl)
        token = secrets.token_hex(8)
        try:
            with self._engine.begin() as conn:
                self._evict_idle(conn, now_ms)
                self._acquire_lease(conn, name, broker_id, run_id, token, now_ms, expires_ms)
                row = conn.execute(
                    select(session_table).where(session_table.c.name == name, session_table.c.broker_id == broker_id)
                ).one_or_none()
                stored: dict[PartitionKey, StoredPartition] = {}
                if row is None:
                    session_id = self._create_session(conn, name, broker_id, now_ms)
                    stored_epoch = 0
                    why = "no stored state for this session (first run, evicted session or lost state)"
                    if session_id is None:
                        why = f"sessionless run: all {self.slot_limit} session slots are held by running sessions"
                else:
                    session_id = row.session_id
                    stored_epoch = row.epoch
                    if stored_epoch == 0:
                        why = "no run has completed in this session yet"
                    elif believed_epoch is None:
                        why = f"caller's epoch is unknown (store is at epoch {stored_epoch})"
                    elif believed_epoch != stored_epoch:
                        why = f"epoch mismatch: caller believes {believed_epoch}, store is at {stored_epoch}"
                    else:
                        why = None
                    stored = self._load_partitions(conn, session_id)
                    conn.execute(
                        sa_update(session_table)
                        .where(session_table.c.session_id == session_id)
                        .values(last_used_at_ms=now_ms)
                    )
                if session_id is not None:
                    conn.execute(
                        sa_update(lease_table)
                        .where(lease_table.c.name == name, lease_table.c.broker_id == broker_id)
                        .values(session_id=session_id)
                    )
                selection = plan_partitions(
                    fingerprints,
                    stored,
                    full_rescan=why is not None,
                    budget=budget,
                    costs=costs,
                    failed_first_runs=self.failed_first_runs,
                )
        except (IntegrityError, _LeaseRaceError):
            # Another run inserted or took over the lease between our read and our write.
            self._raise_busy(name, broker_id, run_id)
            raise
        epoch = 0 if session_id is None else max(stored_epoch, believed_epoch or 0) + 1
        return RunPlan(
            name=name,
            broker_id=broker_id,
            run_id=run_id,
            session_id=session_id,
            epoch=epoch,
            base_epoch=stored_epoch,
            full_rescan=why is not None,
            full_rescan_reason=why,
            started_at=_dt(now_ms),
            lease_token=token,
            lease_expires_at=_dt(expires_ms),
            budget=budget,
            selected=selection.selected,
            deferred=selection.deferred,
            clean=selection.clean,
            removed=selection.removed,
        )

    def finish_run(
        self,
        plan: RunPlan,
        outcomes: Mapping[PartitionKey, Outcome],
        seen_after: Mapping[PartitionKey, PartitionFingerprint] | None = None,
    ) -> None:
        """Commit a run: record outcomes, store the fingerprint of every ok partition as seen,
        move served partitions to the end of the rotation, bump the epoch, release the lease.

        ``seen_after`` holds fingerprints taken after the run's own changes (a run that adds
        snapshot files must not find its partitions dirty next time because of them); ok
        partitions without one keep the fingerprint taken when the run was planned.
        Selected partitions without an outcome count as skipped. Outcomes for partitions that
        were not selected are a caller error.
        """
        selected_keys = {p.key for p in plan.selected}
        unknown = [k for k in outcomes if k not in selected_keys]
        if unknown:
            raise ValueError(f"outcomes for partitions this run did not select: {unknown[:5]}")
        now_ms = _ms(self._clock())
        try:
            with self._engine.begin() as conn:
                self._commit_run(conn, plan, outcomes, now_ms, seen_after or {})
        except StaleRunError:
            self.abandon_run(plan)  # free our lease if we still hold it; the state stays as it was
            raise

    def _commit_run(
        self,
        conn: Connection,
        plan: RunPlan,
        outcomes: Mapping[PartitionKey, Outcome],
        now_ms: int,
        seen_after: Mapping[PartitionKey, PartitionFingerprint],
    ) -> None:
        self._release_lease(conn, plan)
        if plan.session_id is None:
            return  # sessionless: nothing to record
        row = conn.execute(
            select(session_table.c.session_id, session_table.c.epoch, session_table.c.next_seq).where(
                session_table.c.name == plan.name, session_table.c.broker_id == plan.broker_id
            )
        ).one_or_none()
        if row is None or row.session_id != plan.session_id:
            raise StaleRunError(
                f"session ({plan.name!r}, broker {plan.broker_id}) {plan.session_id} was evicted "
                f"during run {plan.run_id!r}; nothing recorded, the next run will rescan"
            )
        if row.epoch != plan.base_epoch:
            raise StaleRunError(
                f"session ({plan.name!r}, broker {plan.broker_id}) moved from epoch {plan.base_epoch} "
                f"to {row.epoch} during run {plan.run_id!r}; nothing recorded"
            )
        seq = row.next_seq
        writes = _PartitionWrites()
        # Deferred partitions keep their place; new ones are queued now, ahead of this run's
        # served partitions, so that those do not overtake them next run.
        for p in plan.deferred:
            if not p.known:
                writes.inserts.append(_row(plan, p, seq, None, now_ms, seen=False))
                seq += 1
            elif plan.full_rescan:
                # A full rescan distrusts what was stored: forget it, so the partition stays dirty.
                writes.forget.append(_row(plan, p, None, None, now_ms, seen=False))
        # Served partitions move to the end of the rotation, in the order they were served.
        for p in plan.selected:
            outcome = outcomes.get(p.key) or Outcome.skipped("no outcome reported")
            ok = outcome.status is OutcomeStatus.OK
            after = seen_after.get(p.key) if ok else None
            if after is not None:
                parts = after.parts
                p = p.model_copy(update={"digest": parts.digest, "bases_digest": parts.bases_digest,
                                         "segments_digest": parts.segments_digest, "files_digest": parts.files_digest,
                                         "log_start_offset": after.log_start_offset,
                                         "log_end_offset": after.log_end_offset})
            values = _row(plan, p, seq, outcome, now_ms, seen=ok)
            seq += 1
            if not p.known:
                writes.inserts.append(values)
            elif ok or plan.full_rescan:
                writes.served.append(values)
            else:
                writes.outcome_only.append(values)  # keep the old "seen": the partition stays dirty
        writes.execute(conn, plan.session_id)
        if plan.removed:
            conn.execute(
                delete(partition_table).where(
                    partition_table.c.session_id == plan.session_id,
                    partition_table.c.topic == bindparam("k_topic"),
                    partition_table.c.partition == bindparam("k_partition"),
                    partition_table.c.log_dir == bindparam("k_log_dir"),
                ),
                [{"k_topic": r.topic, "k_partition": r.partition, "k_log_dir": r.log_dir} for r in plan.removed],
            )
        count = len(plan.selected) + len(plan.deferred) + len(plan.clean)
        conn.execute(
            sa_update(session_table)
            .where(session_table.c.session_id == plan.session_id)
            .values(epoch=plan.epoch, next_seq=seq, partitions=count, last_used_at_ms=now_ms)
        )

    def abandon_run(self, plan: RunPlan) -> bool:
        """Release the lease without recording anything. False if the lease was no longer ours."""
        with self._engine.begin() as conn:
            return conn.execute(self._lease_delete(plan)).rowcount > 0

    # -- housekeeping -------------------------------------------------------------------------

    def sessions(self) -> list[SessionInfo]:
        """Every session with partition counts and its lease (if a run holds one)."""
        s, p, lease = session_table, partition_table, lease_table
        with self._engine.begin() as conn:
            counts = {
                r.session_id: (r.total, r.failed or 0, r.pending or 0)
                for r in conn.execute(
                    select(
                        p.c.session_id,
                        func.count().label("total"),
                        func.sum(case((p.c.outcome == OutcomeStatus.FAILED.value, 1), else_=0)).label("failed"),
                        func.sum(case((p.c.seen_digest.is_(None), 1), else_=0)).label("pending"),
                    ).group_by(p.c.session_id)
                )
            }
            rows = conn.execute(
                select(s, lease.c.run_id, lease.c.started_at_ms, lease.c.expires_at_ms)
                .select_from(s.outerjoin(lease, and_(lease.c.name == s.c.name, lease.c.broker_id == s.c.broker_id)))
                .order_by(s.c.name, s.c.broker_id)
            ).all()
        out: list[SessionInfo] = []
        for r in rows:
            total, failed, pending = counts.get(r.session_id, (0, 0, 0))
            out.append(
                SessionInfo(
                    name=r.name,
                    broker_id=r.broker_id,
                    session_id=r.session_id,
                    epoch=r.epoch,
                    created_at=_dt(r.created_at_ms),
                    last_used_at=_dt(r.last_used_at_ms),
                    partitions=total,
                    failed=failed,
                    pending=pending,
                    lease_run_id=r.run_id,
                    lease_started_at=None if r.started_at_ms is None else _dt(r.started_at_ms),
                    lease_expires_at=None if r.expires_at_ms is None else _dt(r.expires_at_ms),
                )
            )
        return out

    def evict_idle(self) -> list[tuple[str, int]]:
        """Evict sessions unused for ``idle_eviction`` (never one a live run holds) and drop
        expired leases. Returns the evicted (name, broker id) pairs."""
        with self._engine.begin() as conn:
            return self._evict_idle(conn, _ms(self._clock()))

    # -- internals ----------------------------------------------------------------------------

    def _acquire_lease(
        self, conn: Connection, name: str, broker_id: int, run_id: str, token: str, now_ms: int, expires_ms: int
    ) -> None:
        lt = lease_table
        where = (lt.c.name == name, lt.c.broker_id == broker_id)
        held = conn.execute(select(lt).where(*where)).one_or_none()
        values = {
            "run_id": run_id,
            "token": token,
            "session_id": None,
            "started_at_ms": now_ms,
            "expires_at_ms": expires_ms,
        }
        if held is None:
            conn.execute(insert(lt).values(name=name, broker_id=broker_id, **values))
            return
        if held.expires_at_ms > now_ms and held.run_id != run_id:
            raise SessionBusyError(
                name,
                broker_id,
                holder_run_id=held.run_id,
                started_at=_dt(held.started_at_ms),
                expires_at=_dt(held.expires_at_ms),
            )
        # Compare-and-set on the row we read, so two takeovers of one expired lease cannot both win.
        taken = conn.execute(sa_update(lt).where(*where, lt.c.token == held.token).values(**values))
        if taken.rowcount != 1:
            raise _LeaseRaceError

    def _raise_busy(self, name: str, broker_id: int, run_id: str) -> None:
        with self._engine.begin() as conn:
            held = conn.execute(
                select(lease_table).where(lease_table.c.name == name, lease_table.c.broker_id == broker_id)
            ).one_or_none()
        if held is not None and held.run_id != run_id:
            raise SessionBusyError(
                name,
                broker_id,
                holder_run_id=held.run_id,
                started_at=_dt(held.started_at_ms),
                expires_at=_dt(held.expires_at_ms),
            )

    def _release_lease(self, conn: Connection, plan: RunPlan) -> None:
        """Delete our lease; fail if another run holds the lease now (it took ours over)."""
        if conn.execute(self._lease_delete(plan)).rowcount == 1:
            return
        held = conn.execute(
            select(lease_table).where(lease_table.c.name == plan.name, lease_table.c.broker_id == plan.broker_id)
        ).one_or_none()
        # None: our expired lease was cleaned up and nobody took over; the epoch check decides.
        if held is not None:
            raise StaleRunError(
                f"run {plan.run_id!r} lost the lease of ({plan.name!r}, broker {plan.broker_id}) to run "
                f"{held.run_id!r} started at {_dt(held.started_at_ms).isoformat()}; nothing recorded"
            )

    @staticmethod
    def _lease_delete(plan: RunPlan) -> Any:
        return delete(lease_table).where(
            lease_table.c.name == plan.name,
            lease_table.c.broker_id == plan.broker_id,
            lease_table.c.token == plan.lease_token,
        )

    def _create_session(self, conn: Connection, name: str, broker_id: int, now_ms: int) -> str | None:
        """Insert a new session row if a slot is free or can be freed; None: no slot (sessionless)."""
        s, lt = session_table, lease_table
        used = conn.execute(select(func.count()).select_from(s)).scalar_one()
        if used >= self.slot_limit:
            live = and_(lt.c.name == s.c.name, lt.c.broker_id == s.c.broker_id, lt.c.expires_at_ms > now_ms)
            victims = conn.execute(
                select(s.c.name, s.c.broker_id, s.c.session_id)
                .where(~select(lt.c.run_id).where(live).exists())
                .order_by(s.c.last_used_at_ms, s.c.name, s.c.broker_id)
                .limit(used - self.slot_limit + 1)
            ).all()
            if used - len(victims) >= self.slot_limit:
                return None
            self._delete_sessions(conn, [v.session_id for v in victims])
        session_id = secrets.token_hex(8)  # 64 random bits, as KIP-227's session id
        conn.execute(
            insert(s).values(
                name=name,
                broker_id=broker_id,
                session_id=session_id,
                epoch=0,
                next_seq=0,
                partitions=0,
                created_at_ms=now_ms,
                last_used_at_ms=now_ms,
            )
        )
        return session_id

    def _evict_idle(self, conn: Connection, now_ms: int) -> list[tuple[str, int]]:
        s, lt = session_table, lease_table
        cutoff = now_ms - int(self.idle_eviction.total_seconds() * 1000)
        live = and_(lt.c.name == s.c.name, lt.c.broker_id == s.c.broker_id, lt.c.expires_at_ms > now_ms)
        victims = conn.execute(
            select(s.c.name, s.c.broker_id, s.c.session_id).where(
                s.c.last_used_at_ms < cutoff, ~select(lt.c.run_id).where(live).exists()
            )
        ).all()
        self._delete_sessions(conn, [v.session_id for v in victims])
        # Expired leases of crashed runs that nobody took over (their sessions stay).
        conn.execute(delete(lt).where(lt.c.expires_at_ms < now_ms))
        return [(v.name, v.broker_id) for v in victims]

    @staticmethod
    def _delete_sessions(conn: Connection, session_ids: list[str]) -> None:
        if not session_ids:
            return
        params = [{"sid": sid} for sid in session_ids]
        conn.execute(delete(partition_table).where(partition_table.c.session_id == bindparam("sid")), params)
        conn.execute(delete(session_table).where(session_table.c.session_id == bindparam("sid")), params)

    @staticmethod
    def _load_partitions(conn: Connection, session_id: str) -> dict[PartitionKey, StoredPartition]:
        p = partition_table
        rows = conn.execute(
            select(
                p.c.topic,
                p.c.partition,
                p.c.log_dir,
                p.c.seq,
                p.c.seen_digest,
                p.c.seen_bases_digest,
                p.c.seen_segments_digest,
                p.c.seen_files_digest,
                p.c.seen_log_start_offset,
                p.c.seen_log_end_offset,
                p.c.outcome,
                p.c.failures,
            ).where(p.c.session_id == session_id)
        )
        return {(r.topic, r.partition, r.log_dir): StoredPartition(
            seq=r.seq, seen_digest=r.seen_digest, seen_bases_digest=r.seen_bases_digest,
            seen_segments_digest=r.seen_segments_digest, seen_files_digest=r.seen_files_digest,
            seen_log_start_offset=r.seen_log_start_offset, seen_log_end_offset=r.seen_log_end_offset,
            outcome=r.outcome, failures=r.failures) for r in rows}


def _row(
    plan: RunPlan, p: PlannedPartition, seq: int | None, outcome: Outcome | None, now_ms: int, *, seen: bool
) -> dict[str, Any]:
    """Column values of one partition row; ``k_*`` name the row, ``seen`` decides whether the
    fingerprint is recorded (True) or cleared (False)."""
    failures = p.failures
    if outcome is not None and outcome.status is OutcomeStatus.FAILED:
        failures += 1
    elif outcome is not None and outcome.status is OutcomeStatus.OK:
        failures = 0
    return {
        "k_topic": p.topic,
        "k_partition": p.partition,
        "k_log_dir": p.log_dir,
        "seq": seq,
        "seen_digest": p.digest if seen else None,
        "seen_bases_digest": p.bases_digest if seen else None,
        "seen_segments_digest": p.segments_digest if seen else None,
        "seen_files_digest": p.files_digest if seen else None,
        "seen_log_start_offset": p.log_start_offset if seen else None,
        "seen_log_end_offset": p.log_end_offset if seen else None,
        "outcome": None if outcome is None else outcome.status.value,
        "outcome_reason": None if outcome is None else outcome.reason,
        "outcome_run_id": None if outcome is None else plan.run_id,
        "outcome_epoch": None if outcome is None else plan.epoch,
        "failures": failures,
        "updated_at_ms": now_ms,
    }


_SEEN_COLUMNS = [c.name for c in partition_table.c if c.name.startswith("seen_")]
_OUTCOME_COLUMNS = ["seq", "outcome", "outcome_reason", "outcome_run_id", "outcome_epoch", "failures"]


@dataclass
class _PartitionWrites:
    """The partition rows a commit writes, executed in bulk: one executemany per kind."""

    inserts: list[dict[str, Any]] = field(default_factory=list)
    served: list[dict[str, Any]] = field(default_factory=list)  # new seen state and outcome
    outcome_only: list[dict[str, Any]] = field(default_factory=list)  # outcome; seen state kept
    forget: list[dict[str, Any]] = field(default_factory=list)  # seen state cleared; rest kept

    def execute(self, conn: Connection, session_id: str) -> None:
        p = partition_table
        if self.inserts:
            conn.execute(
                insert(p),
                [
                    {"session_id": session_id, "topic": v["k_topic"], "partition": v["k_partition"]}
                    | {"log_dir": v["k_log_dir"]}
                    | {k: x for k, x in v.items() if not k.startswith("k_")}
                    for v in self.inserts
                ],
            )
        key = (
            p.c.session_id == session_id,
            p.c.topic == bindparam("k_topic"),
            p.c.partition == bindparam("k_partition"),
            p.c.log_dir == bindparam("k_log_dir"),
        )
        for batch, cols in (
            (self.served, [*_SEEN_COLUMNS, *_OUTCOME_COLUMNS, "updated_at_ms"]),
            (self.outcome_only, [*_OUTCOME_COLUMNS, "updated_at_ms"]),
            (self.forget, [*_SEEN_COLUMNS, "updated_at_ms"]),
        ):
            if batch:
                stmt = sa_update(p).where(*key).values({c: bindparam(f"v_{c}") for c in cols})
                conn.execute(
                    stmt,
                    [
                        {"k_topic": v["k_topic"], "k_partition": v["k_partition"], "k_log_dir": v["k_log_dir"]}
                        | {f"v_{c}": v[c] for c in cols}
                        for v in batch
                    ],
                )
