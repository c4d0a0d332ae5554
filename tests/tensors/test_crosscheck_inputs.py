"""``nxgates crosscheck GATE LOG --inputs PATH``: a log of a run on given tensors is recomputed on them."""

import numpy as np

from tests.helpers import run_in_process
from tests.oracles.seed_logs import lora_log, parallel_grad_log, serial_nonzero


def export(tmp_path, gate, *pairs):
    args = [a for p in pairs for a in ("--set", p)]
    assert run_in_process("export", gate, *args, "--out", "in.npz", cwd=tmp_path).returncode == 0


def test_a_lora_log_agrees_on_the_exported_tensors(tmp_path):
    export(tmp_path, "lora")
    (tmp_path / "run.log").write_text(lora_log())
    r = run_in_process("crosscheck", "lora", "run.log", "--inputs", "in.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines()[-1] == "CROSSCHECK GREEN -- nxgates agrees with all 20 figures of the lora log"


def test_other_tensors_give_other_figures(tmp_path):
    export(tmp_path, "lora")
    with np.load(tmp_path / "in.npz", allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["x"] = arrays["x"] * 2
    np.savez(tmp_path / "other.npz", **arrays)
    (tmp_path / "run.log").write_text(lora_log())
    r = run_in_process("crosscheck", "lora", "run.log", "--inputs", "other.npz", cwd=tmp_path)
    assert r.returncode == 1
    assert "FAIL L_q32: log 1329684529960, nxgates " in r.stdout


def test_a_parallel_grad_log_agrees_on_the_exported_tensors(tmp_path):
    export(tmp_path, "parallel-grad", "D=5", "H=3", "O=2", "B=7")
    log = parallel_grad_log(workers=16, ran=7, B=7, mism=0, chk=serial_nonzero(5, 3, 2, 7), NP=21)
    (tmp_path / "run.log").write_text(log)
    r = run_in_process("crosscheck", "parallel-grad", "run.log", "--inputs", "in.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_a_set_contradicting_the_tensors_is_a_usage_error(tmp_path):
    export(tmp_path, "lora")
    (tmp_path / "run.log").write_text(lora_log())
    r = run_in_process("crosscheck", "lora", "run.log", "--inputs", "in.npz", "--set", "DM=7", cwd=tmp_path)
    assert r.returncode == 2 and "--set DM=7 contradicts --inputs in.npz: array x gives DM=6" in r.stderr
