"""nxgates: a second, independent implementation of the NX project's gates, runnable in CI."""

__version__ = "0.1.0"
