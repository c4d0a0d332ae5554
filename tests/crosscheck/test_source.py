"""``--source``: a seed program's constants, exactly as declared, and the sizes a crosscheck recomputes at."""

from pathlib import Path

import pytest

from nxgates import crosscheck as xc
from nxgates import registry
from nxgates.crosscheck import source
from nxgates.errors import ConfigError

LORA_NX = Path(__file__).parent.parent / "data" / "nx_intfp_lora_gradcheck_gate.nx"
MINI = ("const S: i64 = 1048576\nconst T: i64 = 3\nconst DM: i64 = 6\nconst R: i64 = 2\n"
        "let DELTA: i64=2097; let TOLP: i64=70\n")
SEED_VALUES = {"S": 1048576, "T": 3, "DM": 6, "R": 2, "DELTA": 2097, "TOLP": 70}
I64_MAX = (1 << 63) - 1


def refusal(call, *args):
    with pytest.raises(ConfigError) as info:
        call(*args)
    return str(info.value)


@pytest.fixture(scope="module")
def lora_entry():
    return registry.load(registry.PACKAGED_CONFIG).resolve("lora")


@pytest.fixture
def program(tmp_path):
    """Write the seed program, edited by ``edit``, and return its path."""

    def _program(edit=lambda text: text):
        path = tmp_path / "edited.nx"
        path.write_text(edit(LORA_NX.read_text()))
        return str(path)

    return _program


# ---- the constants ------------------------------------------------------------------------------------


def test_the_constants_of_a_minimal_program():
    assert xc.read_source_constants(MINI, "lora", "m.nx") == SEED_VALUES


def test_a_crlf_program_reads_as_its_lf_twin():
    assert xc.read_source_constants(MINI.replace("\n", "\r\n"), "lora", "m.nx") == SEED_VALUES


def test_a_missing_declaration_shows_the_form_expected():
    assert refusal(xc.read_source_constants, MINI.replace("const DM: i64 = 6\n", ""), "lora", "m.nx") == (
        "--source m.nx: cannot read DM: no declaration `const DM: i64 = <integer>`")
    assert refusal(xc.read_source_constants, MINI.replace("let DELTA: i64=2097; ", ""), "lora", "m.nx") == (
        "--source m.nx: cannot read DELTA: no declaration `let DELTA: i64=<integer>`")
    assert refusal(xc.read_source_constants, MINI + "let TOLP: i64=71\n", "lora", "m.nx") == (
        "--source m.nx: cannot read TOLP: 2 declarations `let TOLP: i64=<integer>`")


def test_literals_span_the_whole_i64_range_and_no_more():
    for value in (I64_MAX, -(1 << 63), 0, -1):
        assert xc.read_source_constants(MINI.replace("T: i64 = 3", f"T: i64 = {value}"), "lora", "m.nx")["T"] == value
    for value in (1 << 63, -(1 << 63) - 1):
        assert refusal(xc.read_source_constants, MINI.replace("T: i64 = 3", f"T: i64 = {value}"), "lora", "m.nx") == (
            f"--source m.nx: T is not an integer literal: '{value}'")


def test_a_long_non_literal_is_shown_by_its_first_40_characters():
    expr = "1" + "+1" * 30
    assert refusal(xc.read_source_constants, MINI.replace("DM: i64 = 6", f"DM: i64 = {expr}"), "lora", "m.nx") == (
        f"--source m.nx: DM is not an integer literal: '{expr[:40]}'")


def test_a_derived_constant_the_kernels_do_not_assume_is_refused():
    assert refusal(xc.source_params, MINI.replace("1048576", "65536"), "lora", "m.nx") == (
        "--source m.nx: S=65536 but nxgates' kernels need S=1048576: the program's constants are inconsistent")


def test_source_params_are_the_gate_parameters_the_constants_set():
    assert xc.source_params(MINI, "lora", "m.nx") == {"T": 3, "DM": 6, "R": 2, "delta": 2097, "tol_permil": 70}
    assert refusal(xc.source_params, MINI.replace("const R", "const RR"), "lora", "m.nx") == (
        "--source m.nx: cannot read R: no declaration `const R: i64 = <integer>`")


def test_a_declaration_inside_a_block_comment_across_lines_does_not_count():
    text = MINI + "/*\nconst DM: i64 = 7\n*/\n"
    assert xc.read_source_constants(text, "lora", "m.nx")["DM"] == 6


def test_without_comments_keeps_line_starts():
    assert source.without_comments("a/*x*/b") == "a b"
    assert source.without_comments("a/*x\ny\n*/b") == "a\n\nb"
    assert source.without_comments("x // y\nz // w") == "x \nz "
    assert source.without_comments("a /* x */ b /* y\n */ c") == "a   b \n c"


# ---- read_source and describe_source ---------------------------------------------------------------------


def test_read_source_reads_crlf_as_lf(tmp_path):
    path = tmp_path / "p.nx"
    path.write_bytes(b"const T: i64 = 3\r\nconst DM: i64 = 6\r\n")
    assert xc.read_source(str(path)) == "const T: i64 = 3\nconst DM: i64 = 6\n"


def test_read_source_names_the_file_as_the_source(tmp_path):
    path = tmp_path / "p.nx"
    path.write_bytes(b"\xfe")
    assert refusal(xc.read_source, str(path)) == f"--source {path}: not UTF-8 text (byte 0)"
    with open(path, "wb") as fh:
        fh.truncate(xc.SOURCE_LIMIT)
    assert len(xc.read_source(str(path))) == xc.SOURCE_LIMIT
    with open(path, "wb") as fh:
        fh.truncate(xc.SOURCE_LIMIT + 1)
    assert refusal(xc.read_source, str(path)) == f"--source {path}: larger than 1.0 MiB"


def test_describe_source():
    assert xc.describe_source(None) == "the seed's defaults"
    assert xc.describe_source("/some/dir/edited.nx") == "--source edited.nx"


# ---- effective_params --------------------------------------------------------------------------------------


def test_without_a_source_the_params_are_those_of_run(lora_entry):
    assert xc.effective_params(lora_entry, None, (), None) == lora_entry.defaults
    medium = xc.effective_params(lora_entry, "medium", ("tol_permil=5",), None)
    assert medium == {**lora_entry.defaults, "T": 8, "DM": 96, "R": 4, "tol_permil": 5}


def test_the_sources_constants_set_the_sizes(lora_entry, program):
    path = program(lambda t: t.replace("const DM: i64 = 6", "const DM: i64 = 7").replace("TOLP: i64=70", "TOLP: i64=9"))
    params = xc.effective_params(lora_entry, None, ("workers=1", "algorithm=naive"), path)
    assert params == {**lora_entry.defaults, "DM": 7, "tol_permil": 9, "workers": 1, "algorithm": "naive"}


def test_a_preset_cannot_be_combined_with_a_source(lora_entry, program):
    assert refusal(xc.effective_params, lora_entry, "medium", (), program()) == (
        "--preset medium and --source cannot be combined: the source sets the sizes")


@pytest.mark.parametrize("pair, key", [("DM=6", "DM"), ("lora.T=3", "T"), ("delta=5", "delta")])
def test_a_set_of_a_constant_the_source_declares_is_refused(lora_entry, program, pair, key):
    path = program()
    assert refusal(xc.effective_params, lora_entry, None, ("workers=1", pair), path) == (
        f"--set {key}: conflicts with --source {path}, which declares it")


def test_the_sources_values_are_range_checked_and_validated_as_params(lora_entry, program):
    path = program(lambda t: t.replace("const R: i64 = 2", "const R: i64 = 0"))
    assert refusal(xc.effective_params, lora_entry, None, (), path) == (
        f"--source {path}: R=0 is out of range [1, 1048576]")
    path = program(lambda t: t.replace("const R: i64 = 2", "const R: i64 = 7"))
    assert refusal(xc.effective_params, lora_entry, None, (), path) == (
        f"--source {path}: R=7 must not exceed DM=6 (a LoRA rank is at most the width)")


def test_an_unreadable_source_is_named_by_its_path(lora_entry, program):
    path = program(lambda t: t.replace("const T: i64 = 3", ""))
    assert refusal(xc.effective_params, lora_entry, None, (), path) == (
        f"--source {path}: cannot read T: no declaration `const T: i64 = <integer>`")
