"""The phased message-format upgrade: rewrite v0/v1 segments as v1 or v2, rebuild indexes,
back up the originals, roll back (KIP-31/32, KIP-724)."""
