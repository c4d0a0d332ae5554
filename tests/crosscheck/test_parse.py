"""Reading a seed log: its records line by line, and the exact message for each way a log is refused."""

import pytest

from nxgates import crosscheck as xc
from nxgates.crosscheck import parse
from nxgates.errors import ConfigError
from nxgates.safeio import LOG_LIMIT
from tests.oracles.seed_logs import lora_log, parallel_grad_log

LORA_BANNER = ("=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank R) in Q20 INTEGER, "
               "no float ===")
PG_LOG = parallel_grad_log(workers=2, ran=8, B=8, mism=0, chk=1191, NP=192)


def refusal(text, module="lora", **kw):
    with pytest.raises(xc.LogError) as info:
        xc.parse_log(text, module, **kw)
    return str(info.value)


def test_every_line_of_the_lora_log_is_one_record_under_its_key():
    parsed = xc.parse_log(lora_log(TOLP=1), "lora")
    assert parsed.records == {
        "banner": [{"rank": 2}],
        "blank": [{}, {}],
        "params": [{"frozen": 36, "trainable": 24, "permil": 400, "L_q32": 1329684529960}],
        "gradcheck": [{}],
        "A cell": [{"cell": 2, "ana": 20732, "num": 20196, "rel": 2},
                   {"cell": 3, "ana": 115593, "num": 115992, "rel": 2}],
        "A": [{"passed": 10, "cells": 12, "worst": 2, "maxabs": 185888}],
        "B": [{"passed": 12, "cells": 12, "worst": 0, "maxabs": 367790}],
        "total": [{"correct": 22, "cells": 24}],
        "verdict": [{"word": "RED", "correct": 22, "cells": 24}],
    }


def test_the_parallel_grad_log_parses_into_its_records():
    parsed = xc.parse_log(PG_LOG, "parallel_grad")
    assert parsed.records == {
        "header": [{}],
        "pool": [{"workers": 2, "completed": 8, "B": 8}],
        "bits": [{"mismatches": 0, "checked": 1191, "cells": 1536}],
        "T1": [{"word": "PASS"}], "T2": [{"word": "PASS"}], "T3": [{"word": "PASS"}],
        "passed": [{"passed": 3, "total": 3}],
        "verdict": [{"word": parsed.one("verdict")["word"]}],
    }
    assert parsed.one("verdict")["word"].startswith("TA-PARALLEL-GRAD GREEN -- ")


def test_crlf_line_ends_and_blank_trailing_lines_read_as_the_lf_log():
    text = lora_log(TOLP=1)
    assert xc.parse_log(text.replace("\n", "\r\n") + "\n \n\n", "lora").records == xc.parse_log(text, "lora").records


def test_a_carriage_return_elsewhere_in_a_line_is_not_the_seeds_output():
    text = lora_log().replace(" gradcheck:\n", "\r gradcheck:\n")
    assert refusal(text) == "log: line 4: expected the lora line ' gradcheck:', got '\\r gradcheck:'"


def test_an_empty_log_is_truncated_before_its_first_line():
    assert refusal("") == f"log: truncated: ends after line 0, expected the lora line '{LORA_BANNER}'"


def test_a_log_cut_after_a_line_says_which_line_was_expected_next():
    lines = lora_log().splitlines(keepends=True)
    assert refusal("".join(lines[:4])) == ("log: truncated: ends after line 4, expected the lora line "
                                           "' A (lora): P/N (worst=Wpermil of max|grad|=M)'")
    assert refusal("".join(lines[:8])) == ("log: truncated: ends after line 8, expected the lora line "
                                           "'NX-INTFP-LORA verdict=GREEN N/M -- integer LoRA/PEFT PROVEN (frozen "
                                           "base + low-rank adapter grads), no float. modelwright LoRA axis: "
                                           "ABSENT->present. (or RED N/M -- adapter Q-scaling bug)'")


def test_a_last_line_without_its_newline_is_shown():
    assert refusal("a\nb\nc") == "log: truncated: its last line has no newline ('c')"
    assert refusal(lora_log()[:-1], what="log run.log") == (
        "log run.log: truncated: its last line has no newline ('NX-INTFP-LORA verdict=GREEN 24/24 -- integer "
        "LoRA/PEFT PROVEN (frozen base + ...')")


def test_a_shown_line_is_cut_to_77_characters_beyond_80():
    assert parse._shown("x" * 80) == repr("x" * 80)
    assert parse._shown("x" * 81) == repr("x" * 77 + "...")
    assert parse._shown("") == "''"


def test_a_wrong_first_line_is_shown_without_a_hint_unless_it_is_another_gates():
    assert refusal("garbage\n") == f"log: line 1: expected the lora line '{LORA_BANNER}', got 'garbage'"
    assert refusal(PG_LOG) == (f"log: line 1: expected the lora line '{LORA_BANNER}', got 'nx_ta_parallel_grad_gate "
                               "(KEYSTONE: f32 ta_* autograd trains DATA-PARALLEL on...' (this is a parallel-grad log)")
    assert refusal(lora_log(), "parallel_grad").endswith(
        ", got '=== nx_intfp_lora_gradcheck: LoRA parameter-efficient fine-tuning (rank 2) in...' (this is a lora log)")


@pytest.mark.parametrize("n", [1, 2])
def test_another_gates_first_line_later_in_the_log_has_no_hint(n):
    lines = lora_log().splitlines(keepends=True)
    lines[n] = PG_LOG.splitlines(keepends=True)[0]
    expected = ["(an empty line)", " params: base W frozen (N) + LoRA A,B trainable (N) = Npermil of full trained "
                                   "(PEFT) L_q32=N"][n - 1]
    assert refusal("".join(lines)) == (f"log: line {n + 1}: expected the lora line '{expected}', got "
                                       "'nx_ta_parallel_grad_gate (KEYSTONE: f32 ta_* autograd trains "
                                       "DATA-PARALLEL on...'")


def test_the_other_gate_hint_names_only_a_matching_gate():
    assert parse._other_gate("garbage") == ""
    assert parse._other_gate(PG_LOG.splitlines()[0]) == " (this is a parallel-grad log)"
    assert parse._other_gate(lora_log().splitlines()[0]) == " (this is a lora log)"


def test_text_after_the_verdict_names_its_first_line():
    assert refusal(lora_log() + "\n  \nextra\nmore\n") == "log: line 12: unexpected text after the verdict: 'extra'"
    assert refusal(lora_log() + "extra\n", what="log x") == "log x: line 10: unexpected text after the verdict: 'extra'"


def test_failing_cell_lines_after_their_summary_are_refused():
    text = lora_log(TOLP=1)
    lines = text.splitlines(keepends=True)
    moved = lines[:4] + lines[6:7] + lines[4:6] + lines[7:]  # the A summary before A's cell lines
    assert refusal("".join(moved)) == ("log: line 6: expected the lora line ' B (lora): P/N (worst=Wpermil of "
                                       "max|grad|=M)', got ' A (lora) cell 2 ana=20732 num=20196 rel=2'")


def test_a_gate_without_a_seed_log_cannot_be_parsed():
    with pytest.raises(ConfigError) as info:
        xc.parse_log("x\n", "dp_train")
    assert str(info.value) == "gate module 'dp_train' declares no seed log format"


def test_read_log_names_the_file_as_a_log(tmp_path):
    path = tmp_path / "run.log"
    path.write_bytes(b"ok\r\n")
    assert xc.read_log(str(path)) == "ok\r\n"  # line ends are the parser's business
    path.write_bytes(b"\xff\n")
    with pytest.raises(ConfigError) as info:
        xc.read_log(str(path))
    assert str(info.value) == f"log {path}: not UTF-8 text (byte 0)"
    with pytest.raises(ConfigError) as info:
        xc.read_log(str(tmp_path / "none.log"))
    assert str(info.value) == f"log {tmp_path / 'none.log'}: no such file"


def test_read_log_refuses_a_log_over_its_limit(tmp_path):
    path = tmp_path / "big.log"
    with open(path, "wb") as fh:
        fh.truncate(LOG_LIMIT + 1)  # sparse: no data written
    with pytest.raises(ConfigError) as info:
        xc.read_log(str(path))
    assert str(info.value) == f"log {path}: larger than 64.0 MiB"
