"""endpoint: the MySQL client/server protocol endpoint of the master (`master serve --mysql-listen`):
real MySQL and MariaDB replicas connect with CHANGE MASTER TO and get their filtered binlog from
the same DumpService as gRPC slaves. handshake: connection phase and mysql_native_password; auth:
the authentication exchange; tls: TLS and client certificates; admission: who may hold a socket;
queries: the connect-time SQL; dump: the replication commands and the event stream; dumping: a
connection's dump; positions: a replica's binlog positions; row_metadata: @@binlog_row_metadata
from the served Table_maps; replicas: which rules apply to a real replica; server: the TCP server
and error mapping. Framing and command codes are shared with the upstream client (master.protocol)."""

from dumpfilter.master.endpoint.replicas import ReplicaMap
from dumpfilter.master.endpoint.server import MysqlEndpoint

__all__ = ["MysqlEndpoint", "ReplicaMap"]
