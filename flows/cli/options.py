"""What every ``dpaudit`` command shares: the app, exit codes, the one-line error."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, NoReturn

import typer

from auditlib import __version__

app = typer.Typer(
    name="dpaudit",
    help="Audit the privacy of differentially private statistical releases (2020 US Census).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


# --scheduler and --overwrite of the commands that run one flow into one store
SchedulerOption = Annotated[str, typer.Option("--scheduler", help="Dask scheduler; empty: local.")]
OverwriteOption = Annotated[bool, typer.Option("--overwrite")]


class Neighbours(StrEnum):
    add_remove = "add_remove"
    bounded = "bounded"


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr naming the problem, and the exit code (2: bad input, 1: failed run)."""
    typer.echo(f"dpaudit: error: {message}", err=True)
    raise typer.Exit(code)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"dpaudit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool | None,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = None,
) -> None:
    """dpaudit: exact accounting, empirical privacy loss and simulation of DP releases."""
