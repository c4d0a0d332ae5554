"""GateOutput's digest: a string, or a function that computes it when it is first read (a single run never
reads it, so it never pays for hashing)."""

from nxgates.gatekit import GateOutput


def test_a_digest_given_as_a_function_is_computed_once_when_first_read():
    calls = []

    def compute() -> str:
        calls.append(1)
        return "abc"

    out = GateOutput(digest=compute)
    assert calls == []
    assert out.digest == "abc" and out.digest == "abc"
    assert calls == [1]
    out.digest = lambda: "def"  # set after construction, as gates do
    assert out.digest == "def"


def test_a_digest_given_as_a_string_reads_back_as_it_is():
    assert GateOutput().digest == ""
    out = GateOutput(digest="xyz")
    assert out.digest == "xyz"
    out.digest = "uvw"
    assert out.digest == "uvw"
