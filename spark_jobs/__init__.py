"""Spark jobs over binlogs: `split_by_schema` (one binlog per schema or per named rule set) and
`bandwidth_experiment` (what master-side filtering would send each slave of a topology).

`spark_jobs.tasks` is the pure part, with no pyspark import: chunk planning and reading, event
routing, output writing and byte counting. The Spark jobs and the single-process `--no-spark`
paths both call it, which is what makes their outputs byte-identical. Nothing here imports gRPC:
Spark's Python workers fork, and gRPC does not survive a fork."""
