"""GateOutput's digest: a string, or a function that computes it when it is first read (a single run never
reads it, so it never pays for hashing); a gate's optional seed-log declaration."""

from nxgates.gatekit import Figure, GateDef, GateOutput, LineSpec, ParsedLog, SeedLog


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


def test_a_gate_declares_no_seed_log_unless_it_says_so():
    """The field is additive: a GateDef written without it (a plugin's) has none."""
    assert GateDef(params={}, checks=(), run=lambda ctx: GateOutput()).seed_log is None


def test_a_line_spec_matches_whole_lines_into_integer_and_word_figures():
    spec = LineSpec("total", r" (?P<word>GREEN|RED) (?P<n>{INT})/(?P<m>{INT})", " GREEN N/M", words=("word",))
    assert spec.match(" RED -3/12") == {"word": "RED", "n": -3, "m": 12}
    assert spec.match(" RED 3/12 ") is None and spec.match(" RED +3/12") is None
    assert spec.match(" RED " + "9" * 31 + "/1") is None  # bounded length


def test_a_seed_log_gives_its_figures_and_verdict():
    log = ParsedLog({"total": [{"n": 3}]})
    declared = SeedLog("toy", (), lambda parsed, ctx: [Figure("n", parsed.one("total")["n"], 3)],
                       lambda parsed: "GREEN")
    (fig,) = declared.figures(log, None)
    assert fig.agrees and not Figure("n", 3, 4).agrees
    assert declared.verdict(log) == "GREEN" and declared.derived({"S": 1}) == {} and log.all("other") == []
