"""Shadow candidates on a live master: rule sets counted in the master's pass, never streamed
(master.shadow.board), and their rows for the gRPC face and /metrics."""
