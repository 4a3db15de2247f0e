"""The pure core shared by the Spark jobs and the single-process paths: no pyspark, no gRPC.

- `chunks`: which byte ranges of which files to read, cut on transaction boundaries.
- `routing`: which output binlog(s) each transaction goes to, with its per-output event copy.
- `output`: writing many output binlog series at once (index, rotation, GTID state, incidents).
- `local`: the single-process split (`dumpfilter split --no-spark`).
- `bandwidth`: per-slave events and bytes sent with and without master-side filtering.
"""
