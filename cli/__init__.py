"""The command line: `dumpfilter <command>`, one module per sub-command in cli.commands, wired in
cli.app. It imports every layer; nothing imports it."""
