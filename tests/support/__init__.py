"""Helpers shared across test packages: gRPC master fixtures, a slave runner, a TCP fault proxy, a test PKI."""


class SimulatedCrash(Exception):
    """Raised by a test hook to stop the slave abruptly, as a kill would."""
