"""upstream: `master serve --source`, the master as a client of a live primary. It reads the
primary as a replica's IO thread does (source), keeps what it receives as a local binlog series at
the primary's own offsets (binlog_mirror), starts such a series inside a primary file (mid_file),
and purges the series' oldest files (retention). The dump service serves the series like any other."""
