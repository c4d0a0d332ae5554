"""This machine's limits (worker processes, ulimit -v, ulimit -n) are usage errors naming the limit, not
hangs or internal errors."""

from tests.helpers import assert_usage_error, run_script, shell


def test_a_thousand_forked_workers_are_refused_not_hung(tmp_path):
    r = run_script("run", "parallel-grad", "--set", "workers=1024", "--set", "executor=process", "--timeout", "10",
            cwd=tmp_path)
    assert_usage_error(r, "workers=1024", "at most", "executor=thread")


def test_process_workers_within_the_cap_run(tmp_path):
    r = run_script("run", "parallel-grad", "--set", "workers=3", "--set", "executor=process", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "workers=3 pool tasks completed=8/8" in r.stdout


def test_an_address_space_limit_is_part_of_the_memory_budget(tmp_path):
    """`ulimit -v`: refused up front (exit 2), not a MemoryError mid-run (an internal error)."""
    r = shell('ulimit -v 330000 && "$NX" run parallel-grad --preset large', tmp_path)  # well below what large needs
    assert_usage_error(r, "parallel-grad at D=784", "memory budget")


def test_too_few_file_descriptors_for_the_process_pool(tmp_path):
    """`ulimit -n 12`: the pool's pipes cannot be made; exit 2 naming the limit, not exit 3."""
    r = shell('ulimit -n 12 && "$NX" run parallel-grad --executor process', tmp_path)
    assert_usage_error(r, "parallel-grad: the system refused a resource: Too many open files", "ulimit -n")
