"""The MySQL client/server protocol endpoint of the master (`master serve --mysql-listen`): real
MySQL and MariaDB replicas connect with CHANGE MASTER TO and get their filtered binlog from the
same DumpService as gRPC slaves. packets: framing and encodings; handshake: connection phase and
mysql_native_password; queries: the connect-time SQL; dump: the replication commands and the event
stream; replicas: which rules apply to a real replica; server: the TCP server and error mapping."""

from dumpfilter.master.mysql_protocol.replicas import ReplicaMap
from dumpfilter.master.mysql_protocol.server import MysqlEndpoint

__all__ = ["MysqlEndpoint", "ReplicaMap"]
