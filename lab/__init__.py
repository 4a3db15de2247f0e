"""The lab: experiments that run the master and slaves together -- `simulate` (multi-slave
bandwidth runs, lab.simulate), `verify` (real MariaDB replicas as the reference, lab.verify) and the
MariaDB sandbox both use (lab.sandbox). It sits above the edges (master, slave) and below the CLI."""
