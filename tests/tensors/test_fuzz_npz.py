"""Hostile ``.npz`` and ``.npy`` files: the readers return checked arrays or raise the project's one-line error
(:class:`NxError`, exit 2). No other exception escapes, and nothing is printed as a warning.

The archives are mutations of what ``nxgates export lora`` writes: crafted ``.npy`` headers (negative,
boolean or absurd shapes, deep nesting, unknown dtypes), zip members claiming other compression methods or
encryption, flipped bytes and truncations.
"""

import io
import struct
import warnings
import zipfile

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nxgates.cli import cli
from nxgates.core.gradfiles import GradReader
from nxgates.errors import NxError
from nxgates.tensors import read
from nxgates.tensors.lora_spec import LORA_INPUTS

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
NAMES = ("x.npy", "W.npy", "A.npy", "B.npy", "nxgates.npy")


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, bytes]:
    """The members of ``nxgates export lora``, name -> bytes."""
    where = tmp_path_factory.mktemp("export")
    r = CliRunner().invoke(cli, ["export", "lora", "--out", str(where / "good.npz")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    with zipfile.ZipFile(where / "good.npz") as zf:
        return {info.filename: zf.read(info) for info in zf.infolist()}


def archive(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def npy_bytes(header: str, data: bytes = b"", version: tuple[int, int] = (1, 0)) -> bytes:
    """An ``.npy`` member of ``header`` text as given (whatever it says) and ``data`` after it."""
    raw = header.encode("latin1", "replace")
    size = struct.pack("<H" if version[0] == 1 else "<I", len(raw)) if version[0] in (1, 2) else b"\0\0"
    return b"\x93NUMPY" + bytes(version) + size + raw + data


def read_or_refused(path) -> None:
    """The readers' contract: the lora arrays, checked, or an NxError of one line naming the file; and every
    array of the archive, for a gate that takes any (invariance), or the same kind of line."""
    any_read_or_refused(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a warning would reach the user's terminal
        try:
            arrays, meta = read.read_npz(str(path), LORA_INPUTS)
        except NxError as exc:
            assert str(exc).startswith(f"--inputs {path}: ")
            assert "\n" not in str(exc)
            return
    assert list(arrays) == ["x", "W", "A", "B"]
    for arr in arrays.values():
        assert arr.dtype == np.int64 and arr.ndim == 2 and arr.flags.c_contiguous
    assert isinstance(meta, dict)


# ---- .npy headers ---------------------------------------------------------------------------------------

LENGTHS = st.one_of(st.integers(-3, 20), st.integers(-(2 ** 70), 2 ** 70), st.booleans(), st.floats(),
                    st.none(), st.text(max_size=2))
SHAPES = st.one_of(st.tuples(), st.lists(LENGTHS, max_size=5).map(tuple), st.lists(LENGTHS, max_size=3),
                   LENGTHS)
DESCRS = st.one_of(
    st.sampled_from(["<i8", ">i8", "<f4", "<f8", "|O", "<U3", "<U0", "|V0", "|S0", "<M8[s]", "<i8,<i8", "i8",
                     "bogus", "", "(2,)i8", "<i8" * 40]),
    st.text(max_size=8),
    st.lists(st.tuples(st.text(max_size=2), st.sampled_from(["<i8", "|O", "<f4", "x"])), max_size=3),
    st.tuples(st.sampled_from(["<i8", "|O"]), st.lists(st.integers(-2, 2 ** 40), max_size=3).map(tuple)),
)
ORDERS = st.sampled_from([True, False, 0, 1, None, "yes"])


def any_read_or_refused(path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            arrays = read.read_any_npz(str(path))
        except NxError as exc:
            assert str(exc).startswith(f"--inputs {path}: ") and "\n" not in str(exc)
            return
    assert arrays and all(arr.flags.c_contiguous for arr in arrays.values())


def nested(depth: int, opener: str = "(") -> str:
    closer = {"(": ")", "[": "]", "{": "}"}[opener]
    return opener * depth + closer * depth


HEADERS = st.one_of(
    st.builds(lambda d, s, f: repr({"descr": d, "fortran_order": f, "shape": s}), DESCRS, SHAPES, ORDERS),
    st.builds(lambda d, s, f, extra: repr({"descr": d, "fortran_order": f, "shape": s, **extra}), DESCRS, SHAPES,
              ORDERS, st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
    st.builds(lambda s: repr({"descr": "<i8", "shape": s}), SHAPES),
    st.builds(lambda depth, opener, where: where.format(nested(depth, opener)),
              st.sampled_from([1, 50, 199, 200, 201, 1000, 3000]), st.sampled_from(["(", "[", "{"]),
              st.sampled_from(["{{'descr': '<i8', 'fortran_order': False, 'shape': {}}}",
                               "{{'descr': {}, 'fortran_order': False, 'shape': (6, 2)}}",
                               "{{'descr': '<i8', 'fortran_order': False, 'shape': (6, 2), 'x': {}}}",
                               "{}"])),
    st.builds(lambda n, op: f"{{'descr': '<i8', 'fortran_order': False, 'shape': {op * n}1}}",
              st.sampled_from([1, 100, 2000, 4000]), st.sampled_from(["-", "+", "not ", "~"])),
    st.just("{'descr': '<i8', 'fortran_order': False, 'shape': (6L, 2L), }"),  # Python 2's longs
    st.text(max_size=60),
)


@FUZZ
@given(member=st.sampled_from(NAMES), header=HEADERS, data=st.binary(max_size=120),
       version=st.sampled_from([(1, 0), (2, 0), (3, 0), (0, 0), (1, 255)]))
def test_a_crafted_npy_header_is_read_or_refused(tmp_path, exported, member, header, data, version):
    path = tmp_path / "in.npz"
    path.write_bytes(archive({**exported, member: npy_bytes(header, data, version)}))
    read_or_refused(path)


@FUZZ
@given(member=st.sampled_from(NAMES), length=st.integers(0, 2 ** 32 - 1), data=st.binary(max_size=64))
def test_a_header_length_that_lies_is_refused(tmp_path, exported, member, length, data):
    raw = b"\x93NUMPY\x02\x00" + struct.pack("<I", length) + data
    path = tmp_path / "in.npz"
    path.write_bytes(archive({**exported, member: raw}))
    read_or_refused(path)


@pytest.mark.parametrize("header, fragment", [
    ("{'descr': '<i8', 'fortran_order': False, 'shape': (-6, 2), }", "shape (-6, 2) has a negative length"),
    ("{'descr': '<i8', 'fortran_order': False, 'shape': (True, 2), }", "shape (True, 2) is not a tuple of integers"),
    ("{'descr': '<i8', 'fortran_order': 1, 'shape': (6, 2), }", "fortran_order 1 is not True or False"),
    ("{'descr': 'bogus', 'fortran_order': False, 'shape': (6, 2), }", "descr 'bogus' is not a dtype"),
    ("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 2 ** 70), }", "is not a Python literal"),
    ("{'descr': '<i8', 'fortran_order': False, 'shape': (0, 1180591620717411303424), }", "is beyond any array"),
    ("{'descr': '<i8', 'fortran_order': False, 'shape': " + nested(3000) + "}", "is not a Python literal"),
    ("{'descr': '<i8', 'fortran_order': False, 'shape': " + "-" * 4000 + "1}", "is not a Python literal"),
    ("{'descr': '<i8', 'fortran_order': False, 'shape': (6L, 2L), }", "is not a Python literal"),
    ("{'descr': '<i8', 'fortran_order': False, 'shape': (6, 2), 'x': 1}", "is not a dict of descr, fortran_order"),
])
def test_each_bad_header_says_what_is_wrong_in_one_short_line(tmp_path, exported, header, fragment):
    path = tmp_path / "in.npz"
    path.write_bytes(archive({**exported, "A.npy": npy_bytes(header)}))
    with pytest.raises(NxError) as exc:
        read.read_npz(str(path), LORA_INPUTS)
    assert str(exc.value).startswith(f"--inputs {path}: array A: ")
    assert fragment in str(exc.value)
    assert len(str(exc.value)) < 400


# ---- zip members ----------------------------------------------------------------------------------------


def patched(data: bytes, method: int | None = None, flags: int | None = None) -> bytes:
    """``data`` (an archive) with every member claiming compression ``method`` and general-purpose ``flags``,
    in its local header and its central directory entry alike."""
    out = bytearray(data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        local = [info.header_offset for info in zf.infolist()]
    central, at = [], out.find(b"PK\x01\x02")
    while at >= 0:
        central.append(at)
        at = out.find(b"PK\x01\x02", at + 4)
    for off in local:
        if flags is not None:
            struct.pack_into("<H", out, off + 6, flags)
        if method is not None:
            struct.pack_into("<H", out, off + 8, method)
    for off in central:
        if flags is not None:
            struct.pack_into("<H", out, off + 8, flags)
        if method is not None:
            struct.pack_into("<H", out, off + 10, method)
    return bytes(out)


COMPRESSIONS = [zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA]


@FUZZ
@given(written=st.sampled_from(COMPRESSIONS), claimed=st.one_of(st.none(), st.sampled_from(
       [0, 1, 6, 8, 9, 12, 14, 18, 93, 95, 98, 99, 0xFFFF])), flags=st.one_of(st.none(), st.sampled_from(
       [0, 1, 8, 0x20, 0x40, 0x41, 0x800, 0xFFFF])))
def test_a_member_claiming_another_compression_or_encryption_is_read_or_refused(tmp_path, exported, written,
                                                                                claimed, flags):
    path = tmp_path / "in.npz"
    path.write_bytes(patched(archive(exported, written), claimed, flags))
    read_or_refused(path)


@FUZZ
@given(written=st.sampled_from(COMPRESSIONS), flips=st.lists(st.tuples(st.integers(0, 10 ** 6), st.integers(1, 255)),
       min_size=1, max_size=6), cut=st.one_of(st.none(), st.integers(0, 10 ** 6)))
def test_flipped_bytes_or_a_truncation_are_read_or_refused(tmp_path, exported, written, flips, cut):
    data = bytearray(archive(exported, written))
    for at, xor in flips:
        data[at % len(data)] ^= xor
    path = tmp_path / "in.npz"
    path.write_bytes(bytes(data[: cut % (len(data) + 1)] if cut is not None else data))
    read_or_refused(path)


@pytest.mark.parametrize("method, flags, fragment", [
    (99, None, "array x: compression method 99 is not supported (stored, deflate, bzip2, lzma)"),
    (None, 1, "array x: an encrypted member (password-protected archives are not read)"),
    (None, 0x20, "array x: corrupt member, or not an .npy one ("),
])
def test_unsupported_members_are_named(tmp_path, exported, method, flags, fragment):
    path = tmp_path / "in.npz"
    path.write_bytes(patched(archive(exported), method, flags))
    with pytest.raises(NxError) as exc:
        read.read_npz(str(path), LORA_INPUTS)
    assert str(exc.value).startswith(f"--inputs {path}: {fragment}")


def test_corrupt_lzma_data_is_a_corrupt_member(tmp_path, exported):
    data = bytearray(archive(exported, zipfile.ZIP_LZMA))
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as zf:
        info = zf.getinfo("x.npy")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    for at in range(start + 4, start + 30):
        data[at] ^= 0x55
    path = tmp_path / "in.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(NxError) as exc:
        read.read_npz(str(path), LORA_INPUTS)
    assert str(exc.value).startswith(f"--inputs {path}: array x: corrupt member")


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_every_compression_zipfile_knows_is_read(tmp_path, exported, compression):
    path = tmp_path / "in.npz"
    path.write_bytes(archive(exported, compression))
    arrays, meta = read.read_npz(str(path), LORA_INPUTS)
    assert meta["gate"] == "lora" and arrays["A"].shape == (6, 2)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"format": true}'])
def test_metadata_nested_beyond_the_json_parser_or_of_a_boolean_format_is_not_nxgates(tmp_path, exported, text):
    path = tmp_path / "in.npz"
    path.write_bytes(archive({**exported, "nxgates.npy": npy_of(np.array(text))}))
    with pytest.raises(NxError) as exc:
        read.read_npz(str(path), LORA_INPUTS)
    assert str(exc.value) == f"--inputs {path}: member nxgates.npy is not nxgates' metadata"


def npy_of(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr, allow_pickle=False)
    return buf.getvalue()


# ---- .npy files: --compare-grads ------------------------------------------------------------------------


def grads_or_refused(path, B: int = 8, n_params: int = 192) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            reader = GradReader.open(str(path), B, n_params)
        except NxError as exc:
            assert str(exc).startswith(f"--compare-grads {path}: ")
            return
    try:
        assert reader.arr.shape == (B, n_params) and reader.arr.dtype.kind == "f"
    finally:
        reader.close()


@FUZZ
@given(header=HEADERS, data=st.binary(max_size=120), version=st.sampled_from([(1, 0), (2, 0), (3, 0), (9, 9)]))
def test_a_crafted_gradient_file_is_read_or_refused(tmp_path, header, data, version):
    path = tmp_path / "grads.npy"
    path.write_bytes(npy_bytes(header, data, version))
    grads_or_refused(path)


@FUZZ
@given(data=st.binary(max_size=300))
def test_any_bytes_as_a_gradient_file_are_read_or_refused(tmp_path, data):
    path = tmp_path / "grads.npy"
    path.write_bytes(data)
    grads_or_refused(path)


# ---- a file of another kind -----------------------------------------------------------------------------


def test_a_text_file_given_as_gradients_is_said_to_be_no_npy(tmp_path):
    path = tmp_path / "grads.npy"
    path.write_text("0.5 0.25\n")
    with pytest.raises(NxError) as exc:
        GradReader.open(str(path), 8, 192)
    assert str(exc.value) == (f"--compare-grads {path}: not a readable .npy file (it does not start with the .npy "
                              "magic string; a raw float32 dump must be named NAME.bin)")


def test_an_npy_given_as_inputs_is_said_to_be_no_npz(tmp_path, exported):
    path = tmp_path / "in.npy"
    path.write_bytes(exported["A.npy"])
    with pytest.raises(NxError) as exc:
        read.read_npz(str(path), LORA_INPUTS)
    assert str(exc.value) == (f"--inputs {path}: an .npy array, not an .npz archive (one NAME.npy member per "
                              "array, as nxgates export writes)")
