"""`python -m dumpfilter` runs the command line."""

import sys

from dumpfilter.cli import main

sys.exit(main())
