"""``kmigrate``, the command line: ``app`` wires the commands; one module per migration's
commands; ``common`` holds what they share."""
