"""The Census Bureau's privacy-loss budget allocations, shipped with the package.

An allocation gives, per (universe, region, geolevel, query), the query's zCDP budget ρ_q as an exact
rational. The DAS defines neighbours as *replacing* one record within a state (``bounded``): a marginal
query's change vector has squared L2 norm 2, so its discrete Gaussian noise has σ² = 1/ρ_q and a record
change moves two cells. Seed 004 (Su, Su, Wang) reads the same ρ as *add/remove* (``add_remove``):
sensitivity 1 and σ² = 1/(2ρ_q), half the variance the DAS actually drew. Both are offered; every
number says which one it used. Provenance of each file: ``auditlib/data/allocations/PROVENANCE.md``.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from importlib.resources import files
from typing import Literal

from auditlib.exceptions import InvalidParameterError, UnknownNameError

Neighbours = Literal["add_remove", "bounded"]
NEIGHBOURS: tuple[str, ...] = ("add_remove", "bounded")

#: allocation id -> file shipped in ``auditlib/data/allocations``
ALLOCATION_FILES: dict[str, str] = {
    "dhcp_20220825_paper": "dhcp_20220825_paper.csv",
    "dhcp_20220825_exp21_1": "dhcp_20220825_exp21_1.csv",
    "pl94_2021_production": "pl94_2021_production.csv",
    "dhc_2023_production": "dhc_2023_production.csv",
}


def check_neighbours(neighbours: str) -> str:
    if neighbours not in NEIGHBOURS:
        raise InvalidParameterError(
            f"Invalid neighbours: {neighbours!r}; allowed: {', '.join(NEIGHBOURS)}"
        )
    return neighbours


@dataclass(frozen=True)
class QueryBudget:
    """One measured query of one geolevel: its zCDP budget and what it measures."""

    product: str
    universe: str
    region: str
    geolevel: str
    query: str
    histogram: str
    n_cells: int
    rho: Fraction

    def sigma2(self, neighbours: str) -> Fraction:
        """Discrete Gaussian variance parameter under the neighbour relation (exact rational)."""
        check_neighbours(neighbours)
        return 1 / (2 * self.rho) if neighbours == "add_remove" else 1 / self.rho

    def component(self, neighbours: str) -> tuple[Fraction, int]:
        """(σ², number of sensitivity-1 DG terms one record change moves) for the accountant."""
        return (self.sigma2(neighbours), 1 if neighbours == "add_remove" else 2)


@dataclass(frozen=True)
class Allocation:
    """A shipped allocation: every query budget, in the file's (hierarchy) order."""

    allocation_id: str
    product: str
    source: str
    queries: tuple[QueryBudget, ...] = field(repr=False)

    def universes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(q.universe for q in self.queries))

    def regions(self, universe: str) -> tuple[str, ...]:
        self._check("universe", universe, self.universes())
        return tuple(dict.fromkeys(q.region for q in self.queries if q.universe == universe))

    def geolevels(self, universe: str = "persons", region: str = "US") -> tuple[str, ...]:
        """Geolevels of one TopDown run, top (US or State) to bottom (Block)."""
        self._check("region", region, self.regions(universe))
        return tuple(
            dict.fromkeys(
                q.geolevel for q in self.queries if q.universe == universe and q.region == region
            )
        )

    def select(
        self, universe: str = "persons", region: str = "US", geolevel: str | None = None
    ) -> tuple[QueryBudget, ...]:
        levels = self.geolevels(universe, region)
        if geolevel is not None:
            self._check("geolevel", geolevel, levels)
        return tuple(
            q
            for q in self.queries
            if q.universe == universe
            and q.region == region
            and (geolevel is None or q.geolevel == geolevel)
        )

    def rho(
        self, universe: str = "persons", region: str = "US", geolevel: str | None = None
    ) -> Fraction:
        return sum((q.rho for q in self.select(universe, region, geolevel)), Fraction(0))

    def components(
        self,
        neighbours: str,
        universe: str = "persons",
        region: str = "US",
        geolevel: str | None = None,
    ) -> list[tuple[Fraction, int]]:
        """Noise components (σ², count) one record change touches, for the accountant."""
        return [q.component(neighbours) for q in self.select(universe, region, geolevel)]

    def _check(self, what: str, value: str, allowed: tuple[str, ...]) -> None:
        if value not in allowed:
            raise UnknownNameError(
                f"Unknown {what}: {value!r} for allocation {self.allocation_id!r}; "
                f"allowed: {', '.join(allowed)}"
            )


RELEASED_PRODUCTS: tuple[str, ...] = ("pl94_2021_production", "dhc_2023_production")
"""The 2020 Census products released under these allocations, in release order: their cumulative
accounting composes every query of both (persons and units)."""


def cumulative_components(
    allocation_ids: Sequence[str],
    neighbours: str,
    region: str = "US",
    universes: Sequence[str] | None = None,
) -> list[tuple[Fraction, int]]:
    """Noise components of several products (and universes) composed, for the accountant.

    Sequential composition, as the Bureau totals its budgets (ρ of persons and units, and of
    PL94-171 and DHC, add up): a record is assumed to touch every query of every product and
    universe listed. ``universes=None`` takes every universe of each allocation that has
    ``region``; an allocation without ``region`` is an error.
    """
    check_neighbours(neighbours)
    if not allocation_ids:
        raise InvalidParameterError("Invalid allocations: give at least one allocation id")
    out: list[tuple[Fraction, int]] = []
    for allocation_id in allocation_ids:
        alloc = load_allocation(allocation_id)
        unis = universes if universes is not None else alloc.universes()
        for u in unis:
            out += alloc.components(neighbours, u, region)
    return out


def list_allocations() -> list[str]:
    return list(ALLOCATION_FILES)


@cache
def load_allocation(allocation_id: str) -> Allocation:
    """Load a shipped allocation by id (see :data:`ALLOCATION_FILES`)."""
    if allocation_id not in ALLOCATION_FILES:
        raise UnknownNameError(
            f"Unknown allocation: {allocation_id!r}; allowed: {', '.join(ALLOCATION_FILES)}"
        )
    path = files("auditlib") / "data" / "allocations" / ALLOCATION_FILES[allocation_id]
    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    queries = []
    for r in rows:
        rho = Fraction(r["rho_query_exact"])
        if rho <= 0:
            raise InvalidParameterError(f"Invalid rho_query_exact {rho} in {allocation_id}")
        queries.append(
            QueryBudget(
                product=r["product"],
                universe=r["universe"],
                region=r["region"],
                geolevel=r["geolevel"],
                query=r["query"],
                histogram=r["histogram"],
                n_cells=int(r["n_cells"]),
                rho=rho,
            )
        )
    return Allocation(
        allocation_id=allocation_id,
        product=rows[0]["product"],
        source=rows[0]["source"],
        queries=tuple(queries),
    )
