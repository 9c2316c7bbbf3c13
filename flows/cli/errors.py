"""How a ``dpaudit`` command ends badly: the exit codes and the one line on stderr."""

from __future__ import annotations

from typing import NoReturn

import typer

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """One line on stderr naming the problem, and the exit code (2: bad input, 1: failed run)."""
    typer.echo(f"dpaudit: error: {message}", err=True)
    raise typer.Exit(code)
