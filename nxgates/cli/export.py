"""``nxgates export GATE --out FILE.npz``: the tensors a gate computes from, for another implementation to
read (and for ``nxgates run GATE --inputs FILE.npz`` to take back)."""

from __future__ import annotations

import click

from nxgates.cli.group import NxCommand
from nxgates.cli.options import OnceOption, completes, config_option, load_registry
from nxgates.errors import ConfigError


@click.command("export", cls=NxCommand, example="nxgates export lora --preset medium --out lora-in.npz")
@click.argument("gate", shell_complete=completes("gate"))
@click.option("--preset", cls=OnceOption, default=None, metavar="NAME",
              shell_complete=completes("preset"), help="Parameter preset (as for run).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", shell_complete=completes("set"),
              help="Override a parameter (as for run).")
@config_option
@click.option("--out", "out", cls=OnceOption, default=None, metavar="FILE.npz", shell_complete=completes("path"),
              help="Where to write the arrays (an .npz; no pickle inside).")
def export_cmd(gate: str, preset: str | None, sets: tuple[str, ...], config: str | None, out: str | None) -> None:
    """Write GATE's input tensors to an .npz, for another implementation to read.

    lora and lora-train: x, W, A, B (int64 Q20); parallel-grad, ta-gradcheck and dp-train: W1, W2, X, T
    (float32), at the gate's parameters. The gate, its parameters and the format version are stored beside
    them as JSON. `nxgates run GATE --inputs FILE.npz` takes them back.
    """
    from nxgates import registry
    from nxgates.registry.names import ALL
    from nxgates.reporting.files import check_writable
    from nxgates.tensors.write import export_arrays, write_npz

    if not out or out == "-":
        raise ConfigError("export needs --out FILE.npz (a file: the archive is binary)")
    from nxgates.tensors.load import input_spec

    if gate == ALL:
        raise ConfigError(f"export takes one gate, not {ALL!r}: its tensors are the inputs of that gate alone "
                          "(run `nxgates export GATE --out FILE.npz` once per gate)")
    entry = load_registry(config).resolve(gate)
    spec = input_spec(entry, "export")
    params = registry.effective_params([entry], preset, sets)[entry.name]
    check_writable(out, "--out")
    arrays = export_arrays(spec, params, f"export {entry.name}")
    write_npz(out, entry.name, params, arrays)
    shapes = ", ".join(f"{name} {arr.dtype.name}{list(arr.shape)}" for name, arr in arrays.items())
    click.echo(f"{entry.name}: wrote {shapes} to {out}")
