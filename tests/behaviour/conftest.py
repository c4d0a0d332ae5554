"""Fixtures of the behaviour suites: plugin gates installed by path, and a TCP listener that is not a Dask
scheduler. The helpers they build on are in ``tests/behaviour/from_outside.py``."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.behaviour.from_outside import Plugins


@pytest.fixture
def plugins(tmp_path: Path) -> Callable[..., Plugins]:
    """``plugins(gate=source, ...)``: each gate's module written under a fresh site directory, registered
    in one fake distribution ``fixture-plugins 1.0``."""

    def install(**gates: str) -> Plugins:
        site = tmp_path / "site"
        site.mkdir(exist_ok=True)
        points = {}
        for gate, source in gates.items():
            module = f"fixture_{gate.replace('-', '_')}"
            (site / f"{module}.py").write_text(source)
            points[gate] = module
        info = site / "fixture_plugins-1.0.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fixture-plugins\nVersion: 1.0\n")
        lines = "".join(f"{k} = {v}\n" for k, v in points.items())
        (info / "entry_points.txt").write_text(f"[nxgates.gates]\n{lines}")
        work = tmp_path / "work"
        work.mkdir(exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
        env.pop("NXGATES_DASK_SCHEDULER", None)
        return Plugins(env, work, site)

    return install


@pytest.fixture(scope="module")
def fake_scheduler() -> Iterator[Callable[[bytes | None], str]]:
    """``fake_scheduler(reply)``: a TCP listener on 127.0.0.1 that accepts and then never answers
    (``reply=None``) or answers ``reply`` to whatever it is sent; returns its ``tcp://`` address."""
    stop = threading.Event()
    sockets: list[socket.socket] = []

    def serve(listener: socket.socket, reply: bytes | None) -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            sockets.append(conn)
            if reply is not None:
                try:
                    conn.settimeout(1)
                    conn.recv(4096)
                    conn.sendall(reply)
                except OSError:
                    pass

    def start(reply: bytes | None) -> str:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        sockets.append(listener)
        threading.Thread(target=serve, args=(listener, reply), daemon=True).start()
        return f"tcp://127.0.0.1:{listener.getsockname()[1]}"

    yield start
    stop.set()
    for s in sockets:
        s.close()
