"""Tiered-storage readiness: segment-aligned producer snapshots (KIP-952) and staging of closed
segments, indexes, snapshots and leader epochs in S3-compatible storage (KIP-405)."""
