"""``--source``: the sizes and constants of an edited seed program, and the parameters they make."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from nxgates.crosscheck.seedlogs import declared
from nxgates.errors import ConfigError
from nxgates.gatekit import ParamValue

SOURCE_LIMIT = 1 << 20  #: a seed program is a few KiB
#: an i64 literal as the program writes one: ASCII digits, no leading zero, no plus, no minus on zero, bounded
_INT = r"0|-?[1-9][0-9]{0,18}"


def read_source_constants(text: str, module: str, what: str) -> dict[str, int]:
    """Every constant the gate's seed log declares, from the program text: each declared exactly once, as
    an integer literal. The derived ones (S, PG_NW1, ...) must be what nxgates' kernels assume."""
    seed_log = declared(module)
    text = without_comments(text.replace("\r\n", "\n"))  # a CRLF program reads as its LF twin
    values: dict[str, int] = {}
    for const in seed_log.constants:
        name = re.escape(const.name)
        if const.form == "const":
            decl = rf"^[ \t]*const[ \t]+{name}[ \t]*:[ \t]*i64[ \t]*=[ \t]*([^\n]*?)[ \t]*$"
            shown = f"const {const.name}: i64 = <integer>"
        else:
            decl = rf"\blet[ \t]+{name}[ \t]*:[ \t]*i64[ \t]*=[ \t]*([^;\n]*?)[ \t]*(?:;|$)"
            shown = f"let {const.name}: i64=<integer>"
        found = re.findall(decl, text, flags=re.MULTILINE)
        if len(found) != 1:
            how = "no declaration" if not found else f"{len(found)} declarations"
            raise ConfigError(f"--source {what}: cannot read {const.name}: {how} `{shown}`")
        if not re.fullmatch(_INT, found[0]) or not -(1 << 63) <= int(found[0]) < 1 << 63:
            raise ConfigError(f"--source {what}: {const.name} is not an integer literal: {found[0][:40]!r}")
        values[const.name] = int(found[0])
    for name, want in seed_log.derived(values).items():
        if values[name] != want:
            raise ConfigError(f"--source {what}: {name}={values[name]} but nxgates' kernels need {name}={want}: "
                              "the program's constants are inconsistent")
    return values


def without_comments(text: str) -> str:
    """The program without its comments: ``/* ... */`` (across lines, kept as line breaks so line starts
    stay line starts) and ``// ...`` to the end of a line. Comments may mention a constant; only
    declarations count."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group().count("\n") or " ", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", "", text)


def source_params(text: str, module: str, what: str) -> dict[str, int]:
    """The gate parameters the program's constants set (e.g. ``{"T": 3, "DM": 6, ...}``)."""
    values = read_source_constants(text, module, what)
    return {c.param: values[c.name] for c in declared(module).constants if c.param is not None}


def read_source(path: str) -> str:
    from nxgates.safeio import read_text

    return read_text(path, "--source", SOURCE_LIMIT).replace("\r\n", "\n")  # CRLF reads as LF, as logs do


def describe_source(path: str | None) -> str:
    return "the seed's defaults" if path is None else f"--source {Path(path).name}"


def effective_params(entry: Any, preset: str | None, sets: tuple[str, ...], source: str | None
                     ) -> dict[str, ParamValue]:
    """The sizes to recompute at: defaults, ``--preset``, ``--set`` (validated as for ``run``), and the
    constants of ``--source``, which may not be set twice (``--set`` of one of them, or a preset, is an error)."""
    from nxgates import registry

    if source is None:
        return registry.effective_params([entry], preset, sets)[entry.name]
    if preset is not None:
        raise ConfigError(f"--preset {preset} and --source cannot be combined: the source sets the sizes")
    from_source = source_params(read_source(source), entry.module, source)
    for _gate, key, _raw in registry.parse_sets(sets):
        if key in from_source:
            raise ConfigError(f"--set {key}: conflicts with --source {source}, which declares it")
    params = registry.effective_params([entry], None, sets)[entry.name]
    gate = entry.gate
    try:
        for key, value in from_source.items():
            params[key] = gate.params[key].check(key, value)
        gate.validate(params)
    except ConfigError as exc:
        raise ConfigError(f"--source {source}: {exc}") from None
    return params

