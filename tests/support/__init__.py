"""Helpers shared by test folders (on sys.path through pytest's pythonpath option)."""
