"""`python -m dumpfilter` runs the command line."""

from dumpfilter.cli.app import run

run()
