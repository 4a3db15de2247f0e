"""The replication commands' codes and their flags, as both sides of the protocol send them: the
master's endpoint parses them from a replica (endpoint.dump), the upstream client sends them to a
primary (upstream.source) (sql_repl.cc, rpl_binlog_sender.cc; MySQL's and MariaDB's own names)."""

COM_BINLOG_DUMP = 0x12
COM_REGISTER_SLAVE = 0x15
COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_DUMP_NON_BLOCK = 0x01            # send EOF when caught up instead of waiting (mysqlbinlog)
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 0x02  # MariaDB: the replica wants Annotate_rows events
# MySQL 8.0.26+: the replica takes HEARTBEAT_LOG_EVENT_V2 (a 64-bit position). The same bit as
# MariaDB's flag above: which one a dump means depends on the replica's flavor (a MariaDB replica
# sets @mariadb_slave_capability first).
USE_HEARTBEAT_EVENT_V2 = 0x02
BINLOG_THROUGH_GTID = 0x04              # MySQL COM_BINLOG_DUMP_GTID: a GTID set follows
