"""The three migrations, each in the same shape: options, plan (the driver's prepare), unit
(what an engine runs, one segment, partition or metadata log dir at a time) and finalize (the
run report); ``common`` holds what they share: backups, Kafka's replace protocol, index repair.

- ``upgrade``: the phased message-format upgrade (KIP-31/32, KIP-724);
- ``unify``: bootstrap.checkpoint -> zero checkpoint (KIP-1170, KIP-630);
- ``tier``: tiered-storage readiness (KIP-405, KIP-952).
"""
