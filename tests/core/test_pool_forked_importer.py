"""A process pool made in a process forked *after* nxgates was imported (a test runner's or a server's
worker, mutmut's fork server) must work: its workers check that their parent is alive against the pid that
forked them, not the pid that imported the pool module (against the importer's pid every such worker would
exit)."""

import os

from nxgates.core import pool


def _double(task_ctx, worker):
    return 2 * task_ctx


def test_a_process_pool_works_in_a_process_forked_after_the_import():
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the forked child reports through the pipe
        verdict = b"crashed"
        try:
            with pool.make_pool("process", 1) as p:
                p.submit(_double, 21)
                waited = p.wait(1, 30.0)
                verdict = b"ok" if waited.reached and p.n_completed() == 1 else b"failed"
        finally:
            os.write(write_end, verdict)
            os._exit(0)
    os.close(write_end)
    try:
        verdict = os.read(read_end, 16)
    finally:
        os.close(read_end)
        os.waitpid(child, 0)
    assert verdict == b"ok"
