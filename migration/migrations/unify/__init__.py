"""bootstrap.checkpoint -> zero checkpoint unification of KRaft metadata log dirs (KIP-1170,
KIP-630)."""
