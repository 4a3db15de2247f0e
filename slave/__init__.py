"""The dumpfilter slave: registers with a master, streams, rewrites, writes relay logs, applies."""
