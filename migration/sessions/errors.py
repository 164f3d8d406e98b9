"""Errors of the session store."""

from __future__ import annotations

from datetime import datetime


class SessionError(Exception):
    """Base class of session store errors."""


class SessionBusyError(SessionError):
    """Another run holds the lease of this (name, broker) session."""

    def __init__(
        self, name: str, broker_id: int, *, holder_run_id: str, started_at: datetime, expires_at: datetime
    ) -> None:
        self.name = name
        self.broker_id = broker_id
        self.holder_run_id = holder_run_id
        self.started_at = started_at
        self.expires_at = expires_at
        super().__init__(
            f"session ({name!r}, broker {broker_id}) is in use by run {holder_run_id!r} "
            f"started at {started_at.isoformat()}; its lease expires at {expires_at.isoformat()} "
            "(wait for it to finish, or for the lease to expire if that run crashed)"
        )


class StaleRunError(SessionError):
    """``finish_run`` for a plan whose lease or base epoch no longer holds; nothing was recorded."""
