"""protocol: the MySQL client/server protocol as both sides speak it, shared by the endpoint real
replicas connect to (master.endpoint) and the client of an upstream primary (master.upstream):
packet framing and value encodings (packets), the replication commands' codes and flags
(commands)."""
