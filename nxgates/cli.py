"""The ``nxgates`` command line. Exit codes follow pytest: 0 pass, 1 fail, 2 usage, 3 internal, 130 Ctrl-C
(143 SIGTERM)."""

from __future__ import annotations

import contextlib
import errno
import math
import os
import sys
from collections.abc import Iterator
from typing import Any

import click

from nxgates import __version__
from nxgates.errors import (
    EXIT_FAIL,
    EXIT_HANGUP,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    ConfigError,
    NxError,
    Terminated,
)

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


ERROR_LINE_LIMIT = 1000  #: characters of an error line; whatever a user typed, it stays one readable line
MAX_REPEAT = 10_000  #: --repeat's upper bound (one --timeout covers all the runs of a gate anyway)


def _one_line(text: str) -> str:
    line = " ".join(str(text).split())
    if len(line) <= ERROR_LINE_LIMIT:
        return line
    keep = ERROR_LINE_LIMIT // 2  # cut the middle: an error line ends with its reason
    return f"{line[:keep]} ...({len(line) - 2 * keep} characters cut)... {line[-keep:]}"


class OnceOption(click.Option):
    """An option given at most once: the same value twice is harmless, two different values are a usage
    error (click would silently keep the last, e.g. plant only the second of two ``--inject`` faults)."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.once_default = kwargs.pop("default", None)
        super().__init__(*args, multiple=True, default=(), **kwargs)

    def get_default(self, ctx: click.Context, call: bool = True) -> Any:
        return super().get_default(ctx, call) if call else self.once_default  # call=False: for --help

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        values = self.type_cast_value(ctx, value)
        distinct = list(dict.fromkeys(map(str, values)))
        if len(distinct) > 1:
            shown = " and ".join(repr(v if len(v) <= 60 else v[:60] + "...") for v in distinct[:2])
            raise click.BadParameter(f"given {len(values)} times with different values ({shown}); give it once",
                                     ctx=ctx, param=self)
        value = values[-1] if values else self.once_default
        if self.callback is not None:
            value = self.callback(ctx, self, value)
        return value


def _timeout_seconds(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    """A finite positive number of seconds; ``inf`` means no limit (None). ``nan`` would silently switch the
    limit off (every comparison with it is false), so it is refused like 0 and negatives."""
    if value is None or math.isnan(value) or value <= 0:
        raise click.BadParameter(f"{value} is not a positive number of seconds (use inf for no limit)",
                                 ctx=ctx, param=param)
    return None if math.isinf(value) else value


def _stop_reason(exc: BaseException | None) -> tuple[str, int]:
    """What stopped a run, as words and exit code: Ctrl-C 130, SIGTERM 143, SIGHUP 129."""
    if isinstance(exc, Terminated):
        return exc.what, exc.exit_code
    return "interrupted", EXIT_INTERRUPTED


class _Stopped(Exception):
    """Ctrl-C or SIGTERM, carried past click (which would print a blank line and forget which it was)."""

    def __init__(self, cause: KeyboardInterrupt):
        what, self.exit_code = _stop_reason(cause)
        super().__init__(what)


class _ReaderGone(Exception):
    """stdout's reader went away (EPIPE), carried past click (which would exit 1: a failed check)."""


class NxGroup(click.Group):
    """A click group whose every failure is one line on stderr with a documented exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        from nxgates.streams import is_reader_gone, silence

        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Stopped(exc) from None
        except OSError as exc:
            if is_reader_gone(exc):
                raise _ReaderGone() from None
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG):  # `nxgates list >/dev/full`
                silence(sys.stdout)
                raise ConfigError(f"cannot write the output: {exc.strerror or exc}") from None
            raise

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        debug = "--debug" in (sys.argv[1:] if args is None else list(args))
        try:
            rv = super().main(args=args, prog_name=prog_name or "nxgates", complete_var=complete_var,
                              standalone_mode=False, **extra)
            code = rv if isinstance(rv, int) else 0
        except click.exceptions.Exit as exc:
            code = exc.exit_code
        except _Stopped as exc:
            click.echo(f"nxgates: {exc}", err=True)
            code = exc.exit_code
        except (click.exceptions.Abort, KeyboardInterrupt) as exc:
            what, code = _stop_reason(exc if isinstance(exc, Terminated) else exc.__cause__)
            click.echo(f"nxgates: {what}", err=True)
        except _ReaderGone:  # `nxgates list | head -1`: the reader has what it wanted; not an error
            from nxgates.streams import silence

            silence(sys.stdout)
            code = 0
        except click.ClickException as exc:
            if type(exc).__name__ == "NoArgsIsHelpError":  # bare `nxgates`: the help itself, as click does
                click.echo(exc.format_message(), err=True)
            else:
                click.echo(f"nxgates: error: {_one_line(exc.format_message())}", err=True)
            code = EXIT_USAGE
        except NxError as exc:
            click.echo(f"nxgates: error: {_one_line(str(exc))}", err=True)
            code = exc.exit_code
        except Exception as exc:  # a bug in nxgates itself
            if debug:
                import traceback

                traceback.print_exc()
            click.echo(f"nxgates: internal error: {type(exc).__name__}: {_one_line(str(exc))}"
                       " (run with --debug for the traceback)", err=True)
            code = EXIT_INTERNAL
        if standalone_mode:
            sys.exit(code)
        return code


@click.group(cls=NxGroup, context_settings=CONTEXT)
@click.version_option(__version__, "-V", "--version", prog_name="nxgates")
def cli() -> None:
    """Run the NX gates: small programs that prove one property of numerical training code.

    \b
    Exit codes: 0 every check passed, 1 a check failed or a gate timed out,
    2 usage or configuration error, 3 internal error (a bug), 130 interrupted
    (Ctrl-C), 143 terminated (SIGTERM).

    \b
    Examples:
      nxgates list
      nxgates show lora
      nxgates run all
      nxgates run lora --set DM=64 --set R=4 --json report.json
      nxgates run parallel-grad --executor dask
      nxgates crosscheck lora seed-run.log --source nx_intfp_lora_gradcheck_gate.nx
    """


CONFIG_PATH = click.Path(dir_okay=False)  #: shared: each click.Path costs a gettext lookup at start-up


def _config_option(f):
    return click.option("--config", "config", cls=OnceOption, type=CONFIG_PATH, default=None,
                        help="Gate registry to use instead of ./gates.toml or the packaged one.")(f)


def _registry(config: str | None):
    from nxgates import registry

    if config == "":
        raise ConfigError("--config: empty path")
    return registry.load(config)


@cli.command("list")
@_config_option
def list_cmd(config: str | None) -> None:
    """List the gates: name, aliases and what each proves."""
    from nxgates.streams import require_stdout

    require_stdout("the list")
    reg = _registry(config)
    rows = [(e.name, ", ".join(e.aliases) or "-", e.origin, f"BROKEN: {e.broken}" if e.broken else e.description)
            for e in reg.everything()]  # plugin gates too (issue 12): FROM names their distribution
    width = [max(len(r[i]) for r in rows + [("GATE", "ALIASES", "FROM", "")]) for i in range(3)]
    click.echo(f"{'GATE':<{width[0]}}  {'ALIASES':<{width[1]}}  {'FROM':<{width[2]}}  DESCRIPTION")
    for name, aliases, origin, desc in rows:
        click.echo(f"{name:<{width[0]}}  {aliases:<{width[1]}}  {origin:<{width[2]}}  {desc}")


@cli.command("show")
@click.argument("gate")
@_config_option
def show_cmd(gate: str, config: str | None) -> None:
    """Show a gate's parameters, presets, checks and injectable faults."""
    from nxgates.streams import require_stdout

    require_stdout("the description")
    reg = _registry(config)
    if gate == "all" and gate not in reg.gates:
        raise ConfigError(f"show takes one gate ('all' is for run and selftest; gates: {', '.join(reg.gates)})")
    entry = reg.resolve(gate)
    g = entry.gate
    click.echo(f"{entry.name}: {entry.description}")
    if entry.aliases:
        click.echo(f"aliases: {', '.join(entry.aliases)}")
    click.echo("parameters (--set KEY=VALUE):")
    for key, spec in g.params.items():
        click.echo(f"  {key:<12} default {entry.defaults[key]!s:<8} {spec.describe():<24} {spec.doc}")
    click.echo("presets (--preset NAME):")
    for name, values in entry.presets.items():
        shown = " ".join(f"{k}={v}" for k, v in values.items()) or (
            "(the defaults: the seed's sizes)" if entry.plugin_module is None else "(the defaults)")
        click.echo(f"  {name:<12} {shown}")
    click.echo("checks:")
    for check in g.checks:
        click.echo(f"  {check}")
    click.echo("faults (--inject FAULT):")
    for fault, spec in g.faults.items():
        click.echo(f"  {fault:<18} {spec.doc} (caught by: {', '.join(spec.caught_by)})")
    if not g.faults:
        click.echo("  (none)")


@cli.command("run")
@click.argument("gates", nargs=-1, required=True)
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="Override a parameter (repeatable; GATE.KEY=VALUE targets one gate).")
@click.option("--preset", cls=OnceOption, default=None, metavar="NAME",
              help="Parameter preset (see `nxgates show GATE`).")
@_config_option
@click.option("--json", "json_path", cls=OnceOption, default=None, metavar="PATH",
              help="Write the JSON report here ('-' = stdout; the human report then goes to stderr).")
@click.option("--junit", "junit_path", cls=OnceOption, default=None, metavar="PATH",
              help="Write a JUnit XML report here ('-' = stdout; the human report then goes to stderr).")
@click.option("-q", "--quiet", is_flag=True, help="Print only FAIL lines and verdicts.")
@click.option("-v", "--verbose", is_flag=True, help="Print per-cell detail.")
@click.option("--repeat", cls=OnceOption, type=click.IntRange(min=1, max=MAX_REPEAT), default=1, show_default=True,
              help="Run each gate N times; FAIL unless every run agrees (flake hunting).")
@click.option("--timeout", cls=OnceOption, type=float, default=600.0, show_default=True, callback=_timeout_seconds,
              metavar="SECONDS", help="Per-gate time limit, all --repeat runs included; a gate past it FAILs "
              "(timed out). inf = no limit.")
@click.option("--inject", "fault", cls=OnceOption, default=None, metavar="FAULT",
              help="Plant a named defect; the gate must then FAIL (see `nxgates show GATE`). One per run.")
@click.option("--executor", cls=OnceOption, default=None, metavar="NAME",
              help="Shorthand for --set executor=NAME (gates with a worker pool: auto|thread|process|dask).")
@click.option("--scheduler", cls=OnceOption, default=None, metavar="ADDRESS",
              help="parallel-grad, dp-train, lora: run on this Dask cluster (executor=dask; default: "
                   "$NXGATES_DASK_SCHEDULER, else a LocalCluster).")
@click.option("--save-grads", cls=OnceOption, default=None, metavar="PATH",
              help="parallel-grad: write the per-example gradients (.npy, float32, B x NP).")
@click.option("--compare-grads", cls=OnceOption, default=None, metavar="PATH",
              help="parallel-grad: add check T4, gradients bit-identical to a saved .npy.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
def run_cmd(gates: tuple[str, ...], sets: tuple[str, ...], preset: str | None, config: str | None,
            json_path: str | None, junit_path: str | None, quiet: bool, verbose: bool, repeat: int,
            timeout: float | None, fault: str | None, executor: str | None, scheduler: str | None,
            save_grads: str | None,
            compare_grads: str | None, debug: bool) -> int:
    """Run GATES (names, aliases, or `all`) and print PASS/FAIL lines and a verdict per gate."""
    from nxgates import registry, reports
    from nxgates.render import Renderer, RichProgress
    from nxgates.runner import exit_code, run_repeated

    if quiet and verbose:
        raise ConfigError("-q/--quiet and -v/--verbose cannot be combined")
    reg = _registry(config)
    entries = reg.select(gates)
    if executor is not None:
        sets = (*sets, f"executor={executor}")
    params = registry.effective_params(entries, preset, sets)
    options: dict[str, Any] = {"save_grads": save_grads, "compare_grads": compare_grads, "scheduler": scheduler}
    for opt, flag in (("save_grads", "--save-grads"), ("compare_grads", "--compare-grads"),
                      ("scheduler", "--scheduler")):
        if options[opt] is not None:
            takers = [e for e in entries if opt in e.gate.options]
            if not takers:
                raise ConfigError(f"{flag} applies to none of: {', '.join(e.name for e in entries)}")
    if fault is not None:
        for e in entries:
            if fault not in e.gate.faults:
                known = ", ".join(e.gate.faults) or "none"
                raise ConfigError(f"gate {e.name!r} has no fault {fault!r} (faults: {known})")
    if json_path == "-" and junit_path == "-":
        raise ConfigError("--json - and --junit - cannot both write to stdout")
    _distinct_files({"--json": json_path, "--junit": junit_path, "--save-grads": save_grads,
                     "--compare-grads": compare_grads})
    reports.check_writable(json_path, "--json")
    reports.check_writable(junit_path, "--junit")
    reports.check_writable(save_grads, "--save-grads")

    from nxgates.streams import check_written, human_stream, require_stdout

    if "-" in (json_path, junit_path):
        require_stdout("the report")
    human = human_stream(to_stderr="-" in (json_path, junit_path))
    renderer = Renderer(human, quiet=quiet, verbose=verbose)
    for warning in registry.repeated_sets(sets):
        click.echo(f"nxgates: warning: {warning}", err=True)
    done = []
    interrupted: KeyboardInterrupt | None = None
    try:
        for e in entries:
            progress = RichProgress(human) if renderer.console is not None else None
            report = run_repeated(e, params[e.name], repeat, fault=fault, timeout=timeout, progress=progress,
                                  options={k: v for k, v in options.items() if k in e.gate.options})
            done.append(report)
            renderer.gate(report)
            if report.traceback and debug:
                click.echo(report.traceback, err=True)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM/SIGHUP (Terminated)
        interrupted = exc
        click.echo(f"nxgates: {_stop_reason(exc)[0]}; writing the reports of finished gates", err=True)
    with _signals_held():  # a second Ctrl-C or SIGTERM must not leave a report half written
        renderer.summary(done)
        if json_path:
            reports.write_text(json_path, reports.json_text(done, interrupted is not None), "--json")
        if junit_path:
            reports.write_text(junit_path, reports.junit_text(done), "--junit")
    check_written(human)
    if interrupted is not None:
        return _stop_reason(interrupted)[1]
    code = exit_code(done)
    if code == EXIT_INTERNAL:
        click.echo("nxgates: internal error in a gate (run with --debug for the traceback)", err=True)
    return code if done else EXIT_FAIL


@cli.command("selftest")
@click.argument("gates", nargs=-1)
@_config_option
@click.option("--json", "json_path", cls=OnceOption, default=None, metavar="PATH",
              help="Write the kill table and every run as JSON ('-' = stdout).")
@click.option("--timeout", cls=OnceOption, type=float, default=600.0, show_default=True, callback=_timeout_seconds,
              metavar="SECONDS", help="Per-run time limit (inf = no limit).")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
def selftest_cmd(gates: tuple[str, ...], config: str | None, json_path: str | None, timeout: float | None,
                 debug: bool) -> int:
    """Prove every gate can fail: run each clean (must PASS) and with each planted fault (must FAIL).

    Exits 0 only when every clean run passes and every fault is caught by the checks it names.
    """
    import json

    from nxgates import registry, reports
    from nxgates.render import Renderer
    from nxgates.runner import selftest

    reg = _registry(config)
    entries = reg.select(gates or ("all",))
    params = registry.effective_params(entries, None, ())
    reports.check_writable(json_path, "--json")
    from nxgates.streams import check_written, human_stream, require_stdout

    if json_path == "-":
        require_stdout("the report")
    renderer = Renderer(human_stream(to_stderr=json_path == "-"))
    renderer.line(f"{'GATE':<22}{'FAULT':<20}{'EXPECTED':<10}{'RESULT':<10}BY")

    def show(row) -> None:
        gate = f"{row.gate}[{row.variant}]" if row.variant else row.gate
        if row.fault is None:
            result, by = ("PASS" if row.ok else "FAIL"), "all checks" if row.ok else ", ".join(row.failed_checks)
            line = f"{gate:<22}{'(clean)':<20}{'pass':<10}{result:<10}{by}"
        else:
            result = "caught" if row.ok else "MISSED"
            by = ", ".join(row.failed_checks) or row.report.error or "no check failed"
            line = f"{gate:<22}{row.fault:<20}{'fail':<10}{result:<10}{by}"
        renderer.line(line, "green" if row.ok else "bold red")
        if row.report.traceback and debug:
            click.echo(row.report.traceback, err=True)

    rows = selftest(entries, params, timeout, on_row=show)
    n_faults = sum(r.fault is not None for r in rows)
    caught = sum(r.ok for r in rows if r.fault is not None)
    clean_ok = sum(r.ok for r in rows if r.fault is None)
    ok = all(r.ok for r in rows)
    renderer.line(f"==== selftest: {clean_ok}/{len(rows) - n_faults} clean gates passed, {caught}/{n_faults} faults "
                  f"caught -- {'GREEN' if ok else 'RED'}", "bold green" if ok else "bold red")
    if json_path:
        doc = {
            "nxgates": __version__,
            "passed": ok,
            "kills": [{"gate": r.gate, "variant": r.variant, "fault": r.fault, "ok": r.ok,
                       "caught": r.fault is not None and r.ok, "failed_checks": r.failed_checks,
                       "expected": list(r.expected)} for r in rows],
            "gates": [reports.gate_json(r.report) for r in rows],
        }
        text = json.dumps(doc, indent=2) + "\n"
        reports.write_text(json_path, text, "--json")
    check_written(renderer.stream)
    if any(r.report.error_kind == "crash" for r in rows):
        return EXIT_INTERNAL
    return 0 if ok else EXIT_FAIL


def _distinct_files(paths: dict[str, str | None]) -> None:
    """Two options naming one file would lose one of them (a report overwritten by the other, gradients
    overwritten while compared): exit 2, comparing real paths so ``./r.json`` and a symlink count too."""
    seen: dict[str, str] = {}
    for flag, path in paths.items():
        if path == "":
            raise ConfigError(f"{flag}: empty path")
        if path is None or path == "-":
            continue
        try:
            real = os.path.realpath(path)
        except OSError as exc:  # e.g. the current directory was deleted under us
            raise ConfigError(f"{flag} {path}: cannot resolve the path: {exc.strerror or exc}") from None
        if real in seen:
            raise ConfigError(f"{seen[real]} and {flag} name the same file {path}; give each its own")
        seen[real] = flag


STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


def _on_terminate(signum: int, frame: Any) -> None:
    raise Terminated(signum)


def _redeliver_lost_stop(unraisable: Any) -> None:
    """``sys.unraisablehook``: a stop signal's exception (Ctrl-C, SIGTERM, SIGHUP) that was raised inside a
    weakref callback or a ``__del__``, where Python only prints it and carries on, so the run would go on as
    if never stopped. Trip the same signal again a moment later, from a timer thread (tripped from here, the
    handler would raise inside this hook, where it is lost for good): the handler raises in ordinary code
    this time, or lands here again and is re-tripped again. Nothing is printed."""
    exc = unraisable.exc_value
    if not isinstance(exc, KeyboardInterrupt):
        sys.__unraisablehook__(unraisable)
        return
    import _thread
    import signal
    import threading

    retrip = threading.Timer(0.01, _thread.interrupt_main,
                             args=(exc.signum if isinstance(exc, Terminated) else signal.SIGINT,))
    retrip.daemon = True
    retrip.start()


def _install_stop_handlers() -> None:
    """SIGTERM and SIGHUP stop a run as Ctrl-C does (unless ignored by nohup), and no stop signal is lost in
    a finalizer."""
    import signal

    for name in ("SIGTERM", "SIGHUP"):
        if hasattr(signal, name) and signal.getsignal(getattr(signal, name)) != signal.SIG_IGN:  # nohup stays
            signal.signal(getattr(signal, name), _on_terminate)
    sys.unraisablehook = _redeliver_lost_stop


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ignore Ctrl-C, SIGTERM and SIGHUP for a moment (writing the reports); a no-op off the main thread."""
    import signal
    import threading

    saved = {}
    if threading.current_thread() is threading.main_thread():
        for name in STOP_SIGNALS:
            if hasattr(signal, name):
                saved[name] = signal.signal(getattr(signal, name), signal.SIG_IGN)
    try:
        yield
    finally:
        for name, handler in saved.items():
            signal.signal(getattr(signal, name), handler)


# ---- crosscheck (issue 12): the work lives in nxgates/crosscheck.py ------------------------------------


@cli.command("crosscheck")
@click.argument("gate")
@click.argument("log", metavar="LOG")
@click.option("--source", default=None, metavar="FILE.nx",
              help="Read the sizes and constants from the seed program that printed LOG.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a parameter (as for run).")
@click.option("--preset", default=None, metavar="NAME", help="Parameter preset (as for run).")
@_config_option
@click.option("--json", "json_path", default=None, metavar="PATH", help="Write the JSON report here ('-' = stdout).")
@click.option("--junit", "junit_path", default=None, metavar="PATH", help="Write JUnit XML here ('-' = stdout).")
@click.option("-q", "--quiet", is_flag=True, help="Print only FAIL lines and the verdict.")
@click.option("--timeout", cls=OnceOption, type=float, default=600.0, show_default=True, callback=_timeout_seconds,
              metavar="SECONDS", help="Time limit for the recomputation. inf = no limit.")
@click.option("--debug", is_flag=True, help="Show tracebacks of internal errors.")
def crosscheck_cmd(gate: str, log: str, source: str | None, sets: tuple[str, ...], preset: str | None,
                   config: str | None, json_path: str | None, junit_path: str | None, quiet: bool,
                   timeout: float, debug: bool) -> int:
    """Recompute every figure in LOG, the stdout of GATE's seed program ('-' = stdin), and compare.

    Exits 0 when every figure agrees, 1 on any disagreement, 2 when LOG is not a complete run of GATE in
    the seed's format or --source constants cannot be read.
    """
    from nxgates import crosscheck as xc
    from nxgates import reports
    from nxgates.render import Renderer

    entry = _registry(config).resolve(gate)
    if entry.module not in xc.LOG_FORMATS:
        known = ", ".join(xc.GATE_OF_MODULE[m] for m in xc.LOG_FORMATS)
        raise ConfigError(f"gate {entry.name!r} has no seed log format to crosscheck (crosscheck knows: {known})")
    if json_path == "-" and junit_path == "-":
        raise ConfigError("--json - and --junit - cannot both write to stdout")
    _distinct_files({"--json": json_path, "--junit": junit_path, "LOG": log, "--source": source})
    reports.check_writable(json_path, "--json")
    reports.check_writable(junit_path, "--junit")
    params = xc.effective_params(entry, preset, sets, source)
    parsed = xc.parse_log(xc.read_log(log), entry.module, f"log {log}")

    report = xc.crosscheck(entry.name, entry.module, parsed, params, timeout=timeout, source=source)
    from nxgates.streams import check_written, human_stream, require_stdout

    if "-" in (json_path, junit_path):
        require_stdout("the report")
    human = human_stream(to_stderr="-" in (json_path, junit_path))
    renderer = Renderer(human, quiet=quiet)
    sizes = " ".join(f"{k}={v}" for k, v in params.items())
    if not quiet:
        renderer.line(f"# crosscheck {entry.name}: {log} against nxgates at {sizes} ({xc.describe_source(source)})",
                      "bold")
    for item in report.output.lines():  # Lines made into lines, as the run renderer does
        if hasattr(item, "passed"):
            if not (quiet and item.passed):
                renderer.line(f"{'PASS' if item.passed else 'FAIL'} {item.name}: {item.detail}",
                              "green" if item.passed else "bold red")
        elif not quiet:
            renderer.line(item.text)
    checks = report.output.checks
    if not quiet:
        renderer.line(f"---- crosscheck {entry.name}: {sum(c.passed for c in checks)} / {len(checks)} figures "
                      f"agree (the log's own verdict: {report.output.metrics['log_verdict']})")
    renderer.line(report.verdict, "bold green" if report.passed else "bold red")
    if json_path:
        reports.write_text(json_path, reports.json_text([report]), "--json")
    if junit_path:
        reports.write_text(junit_path, reports.junit_text([report]), "--junit")
    check_written(human)
    return 0 if report.passed else EXIT_FAIL


def main() -> None:
    """The console script: like ``cli()``, but never waits at exit for a worker stuck past its timeout.

    SIGTERM (SIGHUP) stops a run like Ctrl-C (finished gates' reports written, one line), exit 143 (129).
    """
    import signal
    import threading

    _install_stop_handlers()
    code = cli.main(standalone_mode=False)
    for name in STOP_SIGNALS:  # the verdict is decided: a signal now must not turn it into a crash
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    stuck = [t for t in threading.enumerate() if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_HANGUP) or stuck:
        for stream in (sys.stdout, sys.stderr):
            try:
                if stream is not None:
                    stream.flush()
            except OSError:
                pass  # a reader gone or a full disk: nothing left to tell anyone
        os._exit(code)
    import gc

    gc.freeze()  # the run is over: shutdown's last collection need not trace every object (~20 ms of a run)
    sys.exit(code)
