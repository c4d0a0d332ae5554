"""gates.toml and --config: every file read is bounded, every mistake refused when loaded (exit 2, one
line naming the file)."""

import os

import pytest

from tests.helpers import GOOD_TABLE, assert_usage_error, run_in_process, run_script


def test_config_that_never_ends_is_refused_at_once(tmp_path):
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    (tmp_path / "big.toml").write_bytes(b"#" * ((1 << 20) + 1))
    with open("/dev/zero", "rb") as zero:
        assert_usage_error(run_script("run", "lora", "--config", "/dev/stdin", cwd=tmp_path, stdin=zero),
                           "not a regular file")
    with open("/dev/zero", "rb") as zero:
        assert_usage_error(run_script("run", "lora", "--config", "-", cwd=tmp_path, stdin=zero), "larger than 1.0 MiB")
    assert_usage_error(run_script("run", "lora", "--config", "/dev/zero", cwd=tmp_path), "/dev/zero",
                       "not a regular file")
    assert_usage_error(run_script("run", "lora", "--config", str(fifo), cwd=tmp_path), "not a regular file")
    assert_usage_error(run_script("list", "--config", "big.toml", cwd=tmp_path), "big.toml", "larger than 1.0 MiB")


def test_config_from_stdin_still_works(tmp_path):
    with open(tmp_path / "cfg", "w+") as fh:
        fh.write(GOOD_TABLE)
        fh.seek(0)
        r = run_script("run", "lora", "--config", "-", cwd=tmp_path, stdin=fh)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("config, fragments", [
    (GOOD_TABLE + 'aliases = ["all"]\n', ("alias 'all' is reserved",)),
    (GOOD_TABLE.replace("[gates.lora]", "[gates.all]"), ("[gates.all]", "'all' is reserved")),
    (GOOD_TABLE + "[gates.lora.presets.seed]\nT = 4\n", ("presets.seed", "'seed' is reserved")),
    (GOOD_TABLE + "[gates.lora.presets.wide]\nR = 9\n", ("presets.wide", "R=9 must not exceed DM=6")),
    (GOOD_TABLE + "[gates.lora.presets.wide]\nDM = 0\n", ("presets.wide", "DM=0 is out of range")),
])
def test_config_mistakes_are_refused_when_loaded(tmp_path, config, fragments):
    (tmp_path / "gates.toml").write_text(config)
    command = ["list"] if "[gates.all]" in config else ["run", "lora"]
    runner = run_script if "reserved" in fragments[-1] else run_in_process  # the script: a mistake of each kind
    assert_usage_error(runner(*command, cwd=tmp_path), "gates.toml", *fragments)
    if "[gates.all]" not in config:
        assert_usage_error(run_in_process("show", "lora", cwd=tmp_path), "gates.toml", *fragments)


def test_a_preset_too_big_for_this_machine_is_checked_only_when_chosen(tmp_path):
    (tmp_path / "gates.toml").write_text(GOOD_TABLE + "[gates.lora.presets.huge]\nT = 1048576\nDM = 1048576\n")
    assert run_script("run", "lora", cwd=tmp_path).returncode == 0
    assert_usage_error(run_script("run", "lora", "--preset", "huge", cwd=tmp_path), "memory budget")


@pytest.mark.parametrize("config, fragment", [
    ("x = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),  # tomllib would raise RecursionError
    (GOOD_TABLE + '[gates.lora.presets."red\\u001b[31m"]\nT = 4\n', "preset names are lower-case"),
])
def test_odd_configs(tmp_path, config, fragment):
    (tmp_path / "gates.toml").write_text(config)
    assert_usage_error(run_in_process("show", "lora", cwd=tmp_path), fragment)
