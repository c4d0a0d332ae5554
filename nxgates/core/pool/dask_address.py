"""A ``--scheduler`` address checked before ``distributed`` is asked to join it.

``distributed.Client(address, timeout=...)`` bounds its connect, but not its handshake with a listener that
accepts TCP and then never answers (or answers as an HTTP server): that can wait far past the timeout. A
Dask scheduler speaks first, though: on accepting a connection it writes its handshake at once. So a TCP
address is probed with a plain socket, within the connect limit: a listener that sends nothing, or sends
something that is not a Dask frame, is not a scheduler (a usage error, exit 2), and ``distributed`` never
waits on it. Other schemes (``tls://``, ``inproc://``, ...) are left to ``distributed``.
"""

from __future__ import annotations

import socket
import struct
import time
from urllib.parse import urlsplit

from nxgates.errors import ConfigError

#: a Dask message starts with the size of its frame table as a uint64: a few words, never megabytes
MOST_FRAMES = 1 << 16


def probe_scheduler(address: str, seconds: float) -> None:
    """Raise :class:`ConfigError` (one line naming ``address``) unless a TCP ``address`` answers as a Dask
    scheduler within ``seconds``; an address of another scheme returns at once."""
    host, port = _tcp_host_port(address)
    if host is None:
        return
    deadline = time.monotonic() + seconds
    try:
        with socket.create_connection((host, port), timeout=seconds) as conn:
            first = b""
            while len(first) < 8:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConfigError(f"cannot reach the dask scheduler at {address}: it accepts connections but "
                                      f"did not answer as a Dask scheduler within {seconds:g} s")
                conn.settimeout(left)
                chunk = conn.recv(8 - len(first))
                if not chunk:
                    break
                first += chunk
    except TimeoutError:
        raise ConfigError(f"cannot reach the dask scheduler at {address}: it accepts connections but did not "
                          f"answer as a Dask scheduler within {seconds:g} s") from None
    except OSError as exc:
        why = " ".join(str(exc.strerror or exc).split())[:160]
        raise ConfigError(f"cannot reach the dask scheduler at {address}: {why}") from None
    if len(first) < 8 or not 0 < struct.unpack("<Q", first)[0] <= MOST_FRAMES:
        shown = "closed the connection" if not first else f"answered {first!r}"
        raise ConfigError(f"cannot reach the dask scheduler at {address}: not a Dask scheduler (it {shown})")


def _tcp_host_port(address: str) -> tuple[str | None, int]:
    """(host, port) of a ``tcp://`` or scheme-less ``host:port`` address; (None, 0) for anything else,
    which ``distributed`` judges itself."""
    text = address if "://" in address else f"tcp://{address}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None, 0
    if parts.scheme != "tcp" or not parts.hostname or port is None:
        return None, 0
    return parts.hostname, port
