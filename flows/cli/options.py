"""The options and choices several ``dpaudit`` commands share, declared once."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from auditlib.allocations import ALLOCATION_FILES

#: the shipped allocation ids, as the options' help lists them
SHIPPED = ", ".join(ALLOCATION_FILES)

# --scheduler and --overwrite of the commands that run one flow into one store
SchedulerOption = Annotated[str, typer.Option("--scheduler", help="Dask scheduler; empty: local.")]
OverwriteOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace an existing store (a dpaudit store only).")
]

# --output and --overwrite of the commands that write one file (or print it on stdout)
OutputFileOption = Annotated[
    Path | None,
    typer.Option(
        "--output", "-o", help="Write to FILE (in an existing directory) instead of stdout."
    ),
]
OverwriteFileOption = Annotated[
    bool, typer.Option("--overwrite", help="Replace an existing file at --output.")
]


class Neighbours(StrEnum):
    add_remove = "add_remove"
    bounded = "bounded"


class AccountMethod(StrEnum):
    auto = "auto"
    exact = "exact"
    bracket = "bracket"
    zcdp_simple = "zcdp-simple"
    zcdp_cks = "zcdp-cks"
    paper_bound = "paper-bound"


class CalibrationMethod(StrEnum):
    exact = "exact"
    paper_bound = "paper-bound"


class CurveFormat(StrEnum):
    csv = "csv"
    json = "json"


# options the accounting commands (account, calibrate, tradeoff) share
AllocationOpt = Annotated[
    str,
    typer.Option(
        "--allocation",
        "-a",
        help=f"Shipped allocation id ({SHIPPED}), or an allocation file (.csv, .toml).",
    ),
]
NeighboursOpt = Annotated[
    Neighbours, typer.Option("--neighbours", "-n", help="Neighbour relation.")
]
AllocationsOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allocation",
        "-a",
        help=f"Shipped allocation id ({SHIPPED}), or an allocation file (.csv, .toml); repeat it "
        "(or give --cumulative) to compose products.",
    ),
]
UniverseOpt = Annotated[str, typer.Option(help="persons | units.")]
RegionOpt = Annotated[str, typer.Option(help="US | PR.")]
LevelsOpt = Annotated[
    list[str] | None, typer.Option("--level", "-l", help="Geolevel(s); default: all.")
]
