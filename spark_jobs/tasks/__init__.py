"""The work of the Spark jobs' tasks, in pure Python (no pyspark, no gRPC): each Spark task calls
it for its chunk, and the single-process paths call it for every chunk in turn.

- `chunks`: which byte ranges of which files to read, cut on transaction boundaries.
- `routing`: which output binlog(s) each transaction goes to, with its per-output event copy.
- `output`: writing many output binlog series at once (index, rotation, GTID state, incidents).
- `local`: the single-process split (`dumpfilter split --no-spark`).
- `segments`: the Spark split's per-(chunk, output) segment files and their join per output.
- `bandwidth`: per-slave events and bytes sent with and without master-side filtering.
"""
