"""`python -m dumpfilter` runs the command line."""

import sys

from dumpfilter.cli.app import main

sys.exit(main())
