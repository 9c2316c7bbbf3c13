"""``dpaudit allocation export``: a shipped allocation written as an allocation file (CSV), the
starting point of your own allocation; reading it back gives the same numbers exactly."""

from __future__ import annotations

from typing import Annotated

import typer

from flows.cli.options import OutputFileOption, OverwriteFileOption

app = typer.Typer(
    help="Allocation files: write a shipped allocation in the file format "
    "`--allocation FILE.csv` reads.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@app.command("export")
def export(
    allocation_id: Annotated[
        str,
        typer.Argument(
            metavar="ID", help="Shipped allocation id (or an allocation file to normalise)."
        ),
    ],
    output: OutputFileOption = None,
    overwrite: OverwriteFileOption = False,
) -> None:
    """Write an allocation as an allocation file: one row per (universe, region, geolevel, query)
    with its exact ρ (a fraction), no neighbour relation (read under either)."""
    from auditlib.allocations import export_allocation
    from flows.cli.checks import check_output_file
    from flows.cli.tradeoff import write_atomically

    if output is not None:
        check_output_file(output, overwrite, "Invalid output", create=False)
    text = export_allocation(allocation_id)
    if output is None:
        typer.echo(text, nl=False)
        return
    write_atomically(output, text)
    n = text.count("\n") - 1
    typer.echo(f"allocation file: {output} ({n} queries)", err=True)
