"""The ``dpaudit`` application: the Typer app with every command in the order ``--help`` lists them,
the global options (``--version``, ``--debug``), the top-level error handling and :func:`main`, the
console entry point.

The commands live in their own modules (``run``, ``compare``, ``experiments``, ``direct``,
``accounting``, ``tradeoff``), which know nothing of this app; it registers them here.

Bad input (a malformed spec, an unknown allocation or geolevel, δ outside (0, 1), an existing store, an
unreachable cluster) exits with code 2 and one line on stderr, before anything is written. A run that
fails while computing exits with code 1 and leaves no store behind. Whatever a command raises ends
the same way (:class:`DpauditGroup`): one ``dpaudit: error:`` line, no traceback unless ``--debug``.
"""

from __future__ import annotations

import errno
import traceback
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from auditlib import __version__
from auditlib.exceptions import DPAuditError
from flows.cli import accounting, allocation, compare, direct, experiments, run, tradeoff
from flows.cli.errors import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    debug_mode,
    fail,
    fail_with_trace,
    set_debug,
)

__all__ = ["app", "main"]


#: the base of Typer's usage errors (its own copy of click's ClickException)
_CLICK_EXCEPTION: type[Exception] = next(
    c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException"
)


class DpauditGroup(TyperGroup):
    """The command group whose commands never end in a traceback: a :class:`DPAuditError` (bad
    input) exits 2, anything else exits 1 with its trace in a log file; one line either way."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for command in self.commands.values():
            plain_metavars(command)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, _CLICK_EXCEPTION):
            raise  # an exit code chosen by a command, or Typer's own usage error
        except DPAuditError as exc:
            if debug_mode():
                traceback.print_exc()
            fail(str(exc), EXIT_BAD_INPUT)
        except KeyboardInterrupt:
            fail("interrupted", EXIT_FAILED)
        except OSError as exc:
            if exc.errno == errno.EPIPE:
                raise  # the reader of stdout went away (`dpaudit ... | head`): click ends quietly
            _fail_midway(ctx, exc)
        except Exception as exc:
            _fail_midway(ctx, exc)


def plain_metavars(command: Any) -> None:
    """Every option of ``command`` (and of its subcommands) that takes a value shows it by name in
    ``--help`` — ``--delta DELTA``, ``--neighbours [add_remove|bounded]`` — and every argument by
    its name alone, not by Python type (``<list[float]>``, ``<bool>``, ``<str>``)."""
    from typer.core import TyperArgument, TyperOption

    for sub in getattr(command, "commands", {}).values():
        plain_metavars(sub)
    for p in command.params:
        if isinstance(p, TyperArgument):  # its name says it: no Python type beside it
            p.display_type_rich = lambda ctx: None  # type: ignore[method-assign]
            continue
        if not isinstance(p, TyperOption) or p.is_flag or p.count or p.metavar is not None:
            continue
        desc = p.type_descriptor
        if desc.is_choice:
            names = (str(getattr(c, "value", c)) for c in desc.choices or ())
            p.metavar = "[" + "|".join(names) + "]"
        else:
            p.metavar = (p.name or "value").upper()


def _fail_midway(ctx: Any, exc: BaseException) -> None:
    command = ctx.invoked_subcommand or "dpaudit"
    first = (str(exc).splitlines() or [""])[0]
    what = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    fail_with_trace(command, f"dpaudit {command} failed: {what}", exc)


app = typer.Typer(
    cls=DpauditGroup,
    name="dpaudit",
    help="Audit the privacy of differentially private statistical releases (2020 US Census).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

#: (name, function) of every command, in the order of ``dpaudit --help``
COMMANDS = (
    ("run", run.run),
    ("spec", run.spec),
    ("verify", run.verify),
    ("report", run.report),
    ("compare", compare.compare),
    ("serve", run.serve),
    ("sweep", experiments.sweep),
    ("mpl-coverage", experiments.mpl_coverage),
    ("fdp-coverage", experiments.fdp_coverage),
    ("direct", direct.direct),
    ("account", accounting.account),
    ("calibrate", accounting.calibrate),
    ("tradeoff", tradeoff.tradeoff),
)
for _name, _command in COMMANDS:
    app.command(name=_name)(_command)
app.add_typer(allocation.app, name="allocation")  # allocation export


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dpaudit {__version__}")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="On a failure, print the full traceback, and let a run print on the terminal "
            "everything Prefect and Dask print (by default they go to a log file).",
        ),
    ] = False,
) -> None:
    """dpaudit: exact accounting, empirical privacy loss and simulation of DP releases."""
    set_debug(debug)


def main() -> None:
    """The ``dpaudit`` console script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
