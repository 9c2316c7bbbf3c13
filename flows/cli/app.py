"""The ``dpaudit`` application: the Typer app with every command in the order ``--help`` lists them,
the global options (``--version``) and :func:`main`, the console entry point.

The commands live in their own modules (``run``, ``experiments``, ``direct``, ``accounting``,
``tradeoff``), which know nothing of this app; it registers them here.

Bad input (a malformed spec, an unknown allocation or geolevel, δ outside (0, 1), an existing store, an
unreachable cluster) exits with code 2 and one line on stderr, before anything is written. A run that
fails while computing exits with code 1 and leaves no store behind.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from auditlib import __version__
from auditlib.exceptions import DPAuditError
from flows.cli import accounting, direct, experiments, run, tradeoff
from flows.cli.errors import EXIT_BAD_INPUT

__all__ = ["app", "main"]

app = typer.Typer(
    name="dpaudit",
    help="Audit the privacy of differentially private statistical releases (2020 US Census).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

#: (name, function) of every command, in the order of ``dpaudit --help``
COMMANDS = (
    ("run", run.run),
    ("spec", run.spec),
    ("verify", run.verify),
    ("report", run.report),
    ("serve", run.serve),
    ("sweep", experiments.sweep),
    ("mpl-coverage", experiments.mpl_coverage),
    ("direct", direct.direct),
    ("account", accounting.account),
    ("calibrate", accounting.calibrate),
    ("tradeoff", tradeoff.tradeoff),
)
for _name, _command in COMMANDS:
    app.command(name=_name)(_command)


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
) -> None:
    """dpaudit: exact accounting, empirical privacy loss and simulation of DP releases."""


def main() -> None:
    try:
        app()
    except DPAuditError as exc:  # pragma: no cover - commands catch their own
        typer.echo(f"dpaudit: error: {exc}", err=True)
        sys.exit(EXIT_BAD_INPUT)


if __name__ == "__main__":  # pragma: no cover
    main()
