"""Stub of the compiled ``_clayout.pyx``."""

LAYOUT: dict[str, int]
