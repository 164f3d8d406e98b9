"""Benchmarks of the hot paths, each run side by side with its baseline (``python -m bench.run``)."""
