"""A seed program's stdout, matched line by line against the gate's declared format (exact forms only)."""

from __future__ import annotations

from nxgates.crosscheck.seedlogs import declared, known
from nxgates.errors import ConfigError
from nxgates.gatekit import ParsedLog


class LogError(ConfigError):
    """The log is not a complete run of the gate in the seed's format (exit 2)."""


def parse_log(text: str, module: str, what: str = "log") -> ParsedLog:
    """Match ``text`` line by line against the module's format; anything else is a :class:`LogError`."""
    seed_log = declared(module)
    specs, gate = seed_log.lines, seed_log.name
    if text and not text.endswith("\n"):
        raise LogError(f"{what}: truncated: its last line has no newline ({_shown(text.splitlines()[-1])})")
    lines = [line.removesuffix("\r") for line in text.split("\n")[:-1]]
    parsed = ParsedLog()
    n = 0
    for spec in specs:
        while spec.repeat and n < len(lines) and (record := spec.match(lines[n])) is not None:
            parsed.records.setdefault(spec.key, []).append(record)
            n += 1
        if spec.repeat:
            continue
        if n >= len(lines):
            raise LogError(f"{what}: truncated: ends after line {n}, expected the {gate} line '{spec.shows}'")
        record = spec.match(lines[n])
        if record is None:
            hint = _other_gate(lines[n]) if n == 0 else ""
            raise LogError(f"{what}: line {n + 1}: expected the {gate} line '{spec.shows}', got "
                           f"{_shown(lines[n])}{hint}")
        parsed.records.setdefault(spec.key, []).append(record)
        n += 1
    extra = [i for i in range(n, len(lines)) if lines[i].strip()]
    if extra:
        raise LogError(f"{what}: line {extra[0] + 1}: unexpected text after the verdict: {_shown(lines[extra[0]])}")
    return parsed


def read_log(path: str) -> str:
    from nxgates.safeio import LOG_LIMIT, read_text

    return read_text(path, "log", LOG_LIMIT)


def _shown(line: str) -> str:
    return repr(line if len(line) <= 80 else line[:77] + "...")


def _other_gate(line: str) -> str:
    """A hint when the first line is another gate's: the commonest mistake is naming the wrong gate. (The gate's
    own first line did not match ``line``, so the gate named is another.)"""
    for seed_log in known().values():
        if seed_log.lines[0].match(line) is not None:
            return f" (this is a {seed_log.name} log)"
    return ""
