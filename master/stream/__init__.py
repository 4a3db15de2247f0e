"""stream: one Dump call per slave. The stream that walks the shared segments and turns the
slave's answers into batches (slave_stream.SlaveStream), and the Dump handler's read-ahead that
makes the next replies while grpc sends the one before (send_ahead)."""
