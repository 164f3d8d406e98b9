"""The demo: a sample legacy cluster (``sample_cluster``) and the three migration DAGs run on
it end to end (``run``; ``make demo`` or ``python -m migration.demo``)."""
