"""dumpfilter: master-side replication filter simulator for MySQL and MariaDB (WL#2387).

One namespace for the whole product. This folder holds the shared core, lowest layer first:
`errors`, the compiled `_core`, `codec` (binlog bytes and formats), `skip_policy`, `rules` (MySQL's
filter semantics), `binlogs` (files, series, the offline filter), `workload` (synthetic binlogs),
and the models every edge shares (`topology`, `wire`, `charts`, the generated `v1`). The edges --
dumpfilter.master, .slave, .spark_jobs -- and the lab and cli layers live in the checkout's
master/, slave/, spark_jobs/, lab/ and cli/ folders (pyproject's package-dir).
"""

import os

# gRPC's fork handlers off unless the process says otherwise (before anything imports grpc): the
# product never uses gRPC across a fork (its children are fresh programs: MariaDB servers, Spark,
# a fresh Python), but it starts them with a preexec_fn (dumpfilter.children), which makes
# subprocess fork() where it would vfork(). With fork support on, a harness that started a real
# replica while its master served printed gRPC's "fork_posix.cc:71 ... skipping fork() handlers"
# into the caller's output, and grpcio >= 1.80 can abort the child (grpc/grpc#43055).
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

__version__ = "0.1.0"
