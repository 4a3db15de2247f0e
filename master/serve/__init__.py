"""serve: the running `master serve` process's own faces. The gRPC service (grpc_server: protobuf
to domain values, authentication, status codes), the Prometheus view and its /metrics endpoint
(metrics, metrics_http), and glibc malloc's arenas in the long-running process (malloc_arenas).
The MySQL-protocol endpoint is its own room (master.endpoint)."""
