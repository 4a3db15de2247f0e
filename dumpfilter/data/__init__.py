"""Package data: the built-in default topology of `dumpfilter simulate`."""
