"""A --scheduler address is probed before distributed joins it: TCP listeners that do not speak Dask are refused."""

import socket
import struct
import threading
import time
import types

import pytest

from nxgates.core.pool import dask_address
from nxgates.core.pool.dask_address import MOST_FRAMES, _tcp_host_port, probe_scheduler
from nxgates.errors import ConfigError


@pytest.mark.parametrize(("address", "expected"), [
    ("127.0.0.1:8786", ("127.0.0.1", 8786)),
    ("tcp://scheduler.example:1", ("scheduler.example", 1)),
    ("tcp://[::1]:8786", ("::1", 8786)),
    ("tls://127.0.0.1:8786", (None, 0)),
    ("inproc://127.0.0.1/1/2", (None, 0)),
    ("127.0.0.1", (None, 0)),
    ("tcp://:8786", (None, 0)),
    ("tcp://127.0.0.1:99999", (None, 0)),
    ("tcp://127.0.0.1:port", (None, 0)),
])
def test_tcp_host_port_of_an_address(address, expected):
    assert _tcp_host_port(address) == expected


class Listener:
    """A loopback listener that accepts one connection and plays ``script``: bytes are sent, a float is slept,
    None closes; after the script the connection stays open, silent, for at most a few seconds."""

    def __init__(self, *script):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.address = f"tcp://127.0.0.1:{self.sock.getsockname()[1]}"
        self.done = threading.Event()
        self.closing = threading.Event()
        self._conns = []
        threading.Thread(target=self._serve, args=(script,), daemon=True).start()

    def _serve(self, script):
        conn, _ = self.sock.accept()
        self._conns.append(conn)
        for step in script:
            if step is None:
                conn.close()
            elif isinstance(step, float):
                time.sleep(step)
            else:
                conn.sendall(step)
        self.done.set()
        self.closing.wait(3)
        conn.close()

    def close(self):
        self.closing.set()
        self.done.wait(5)
        for conn in self._conns:
            conn.close()
        self.sock.close()


@pytest.fixture
def listen():
    made = []

    def make(*script):
        made.append(Listener(*script))
        return made[-1]

    yield make
    for lst in made:
        lst.close()


def frame_header(n):
    return struct.pack("<Q", n) + b"\x00" * 8  # a frame count, then more of the handshake


def refusal(address, seconds=2.0):
    with pytest.raises(ConfigError) as err:
        probe_scheduler(address, seconds)
    return str(err.value)


@pytest.mark.parametrize("frames", [1, 3, MOST_FRAMES])
def test_a_listener_that_speaks_dask_first_is_a_scheduler(listen, frames):
    assert probe_scheduler(listen(frame_header(frames)).address, 2.0) is None


def test_a_handshake_that_arrives_in_pieces_is_read_whole(listen):
    whole = frame_header(2)
    server = listen(whole[:3], 0.1, whole[3:] + b"rest of the handshake")
    assert probe_scheduler(server.address, 2.0) is None


@pytest.mark.parametrize("frames", [0, MOST_FRAMES + 1, 1 << 63])
def test_a_frame_count_out_of_range_is_not_a_scheduler(listen, frames):
    server = listen(frame_header(frames))
    assert refusal(server.address) == (f"cannot reach the dask scheduler at {server.address}: not a Dask scheduler "
                                       f"(it answered {struct.pack('<Q', frames)!r})")


def test_an_http_server_is_not_a_scheduler(listen):
    server = listen(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    assert refusal(server.address) == (f"cannot reach the dask scheduler at {server.address}: not a Dask scheduler "
                                       "(it answered b'HTTP/1.1')")


def test_a_short_answer_then_a_hang_up_is_not_a_scheduler(listen):
    server = listen(b"abc", None)
    assert refusal(server.address) == (f"cannot reach the dask scheduler at {server.address}: not a Dask scheduler "
                                       "(it answered b'abc')")


def test_a_listener_that_hangs_up_is_not_a_scheduler(listen):
    server = listen(None)
    assert refusal(server.address) == (f"cannot reach the dask scheduler at {server.address}: not a Dask scheduler "
                                       "(it closed the connection)")


def test_a_silent_listener_times_out_within_the_limit(listen):
    server = listen()
    assert refusal(server.address, 0.3) == (f"cannot reach the dask scheduler at {server.address}: it accepts "
                                            "connections but did not answer as a Dask scheduler within 0.3 s")


def test_a_refused_connection_names_the_reason():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()  # bound, then released: nothing listens there
    assert refusal(f"127.0.0.1:{port}") == f"cannot reach the dask scheduler at 127.0.0.1:{port}: Connection refused"


def test_an_os_error_without_strerror_is_shown_by_its_text_on_one_line(monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("first line\n   second   line " + "x" * 200)

    monkeypatch.setattr(socket, "create_connection", fail)
    text = refusal("tcp://127.0.0.1:1")
    why = ("first line second line " + "x" * 200)[:160]
    assert text == f"cannot reach the dask scheduler at tcp://127.0.0.1:1: {why}"


def test_an_address_of_another_scheme_is_left_to_distributed(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("no connection for a tls:// address")

    monkeypatch.setattr(socket, "create_connection", never)
    assert probe_scheduler("tls://127.0.0.1:1", 1.0) is None


class RecordingConnection:
    """A real connection whose timeouts and reads are recorded."""

    def __init__(self, conn, log):
        self.conn, self.log = conn, log

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.conn.close()

    def settimeout(self, seconds):
        self.log.append(("settimeout", seconds))
        self.conn.settimeout(seconds)

    def recv(self, n):
        self.log.append(("recv", n))
        return self.conn.recv(n)


class FakeClock:
    def __init__(self, *times):
        self.times = list(times)

    def monotonic(self):
        return self.times.pop(0) if len(self.times) > 1 else self.times[0]


def recording(monkeypatch, clock):
    log = []
    real = socket.create_connection

    def connect(address, timeout):
        log.append(("connect", address, timeout))
        return RecordingConnection(real(address, timeout=timeout), log)

    monkeypatch.setattr(socket, "create_connection", connect)
    monkeypatch.setattr(dask_address, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    return log


def test_each_read_asks_for_what_is_missing_within_what_is_left(listen, monkeypatch):
    whole = frame_header(2)
    server = listen(whole[:3], 0.2, whole[3:])
    log = recording(monkeypatch, FakeClock(100.0, 101.5, 102.0))
    assert probe_scheduler(server.address, 4.0) is None
    port = int(server.address.rsplit(":", 1)[1])
    assert log == [("connect", ("127.0.0.1", port), 4.0), ("settimeout", 2.5), ("recv", 8),
                   ("settimeout", 2.0), ("recv", 5)]


def test_a_deadline_already_passed_refuses_without_reading(listen, monkeypatch):
    server = listen(frame_header(2))
    log = recording(monkeypatch, FakeClock(100.0, 105.0))
    assert refusal(server.address, 5.0) == (f"cannot reach the dask scheduler at {server.address}: it accepts "
                                            "connections but did not answer as a Dask scheduler within 5 s")
    assert [entry[0] for entry in log] == ["connect"]


def test_a_deadline_less_than_a_second_away_still_reads(listen, monkeypatch):
    server = listen(frame_header(2))
    log = recording(monkeypatch, FakeClock(100.0, 104.5))
    assert probe_scheduler(server.address, 5.0) is None
    assert log[1:] == [("settimeout", 0.5), ("recv", 8)]
