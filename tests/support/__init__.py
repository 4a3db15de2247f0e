"""Helpers shared across test packages: gRPC master fixtures, a slave runner, a TCP fault proxy, a test PKI."""
