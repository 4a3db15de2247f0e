"""dumpfilter: master-side replication filter simulator for MySQL and MariaDB (WL#2387).

One namespace for the whole product. This folder holds the shared core, lowest layer first:
`errors`, the compiled `_core`, `codec` (binlog bytes and formats), `skip_policy`, `rules` (MySQL's
filter semantics), `binlogs` (files, series, the offline filter), `workload` (synthetic binlogs),
and the models every edge shares (`topology`, `wire`, `charts`, the generated `v1`). The edges --
dumpfilter.master, .slave, .spark_jobs -- and the lab and cli layers live in the checkout's
master/, slave/, spark_jobs/, lab/ and cli/ folders (pyproject's package-dir).
"""

__version__ = "0.1.0"
