"""Sub-commands of `dumpfilter`: each module registers one with `register(subparsers)`."""
