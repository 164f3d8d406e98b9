"""``kmigrate``, the command line: ``app`` wires the commands; one module per migration's
commands; ``common`` holds what they share.

Commands import the migration they run inside their function, not at module top: measured
(best of 3, this repository's machine), importing ``migration.cli.app`` takes 0.63 s, and with
every driver, the validator, the report store, the session store and the sample cluster at
module top 1.26 s, paid by ``kmigrate --help`` and every other command alike.
"""
