"""dumpfilter: master-side replication filter simulator for MySQL and MariaDB (WL#2387).

This package holds only the thin edge: the command line. The pure core lives in
`binlog_codec` (bytes and binlog formats) and `filter_rules` (MySQL filter semantics).
"""

__version__ = "0.1.0"
