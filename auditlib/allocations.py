"""The Census Bureau's privacy-loss budget allocations, shipped with the package.

An allocation gives, per (universe, region, geolevel, query), the query's zCDP budget ρ_q as an exact
rational. The DAS defines neighbours as *replacing* one record within a state (``bounded``): a marginal
query's change vector has squared L2 norm 2, so its discrete Gaussian noise has σ² = 1/ρ_q and a record
change moves two cells. Su, Su & Wang (Su, Su, Wang) reads the same ρ as *add/remove* (``add_remove``):
sensitivity 1 and σ² = 1/(2ρ_q), half the variance the DAS actually drew. Both are offered; every
number says which one it used. Provenance of each file: ``auditlib/data/allocations/PROVENANCE.md``.

:func:`load_allocation` also reads an allocation file (``.csv`` or ``.toml``,
:mod:`auditlib.allocation_file`): per query ρ or the noise of a discrete Gaussian, geometric,
Laplace or Gaussian mechanism; :meth:`Allocation.losses` gives every query's loss component for the
mixed accountant, :meth:`Allocation.components` the discrete Gaussian ones (and refuses others).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from importlib.resources import files
from typing import Any, Literal

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
    """One measured query of one geolevel: its zCDP budget and what it measures.

    A shipped query is a discrete Gaussian given by ρ_q alone. A query of an allocation file may
    instead give its noise (``noise``: σ² of a discrete Gaussian, the scale b of a geometric or
    Laplace, σ of a Gaussian) and ``sensitivity`` (how many of its cells one neighbouring change
    moves, each by one); ``rho`` is then the zCDP its noise gives (pure ε-DP mechanisms: ε²/2).
    """

    product: str
    universe: str
    region: str
    geolevel: str
    query: str
    histogram: str
    n_cells: int
    rho: Fraction
    mechanism: str = "discrete_gaussian"
    noise: Fraction | None = None
    sensitivity: int | None = None
    where: str = ""  # the line of the file the query came from ("" for a shipped one)

    def cells_moved(self, neighbours: str) -> int:
        """Cells one neighbouring change moves by one: the sensitivity, else 1 (add/remove) or
        2 (bounded, a record replaced)."""
        check_neighbours(neighbours)
        if self.sensitivity is not None:
            return self.sensitivity
        return 1 if neighbours == "add_remove" else 2

    def sigma2(self, neighbours: str) -> Fraction:
        """Discrete Gaussian variance parameter under the neighbour relation (exact rational)."""
        check_neighbours(neighbours)
        self._require_discrete_gaussian()
        if self.noise is not None:
            return self.noise
        return self.cells_moved(neighbours) / (2 * self.rho)

    def noise_variance(self, neighbours: str) -> float:
        """What a simulation draws for each of the query's cells: the discrete Gaussian σ² (a
        ``float``), or, for other noise, a :class:`~auditlib.simulate.noise.NoiseVariance` (the
        law's variance, naming the mechanism and its scale or σ)."""
        if self.mechanism == "discrete_gaussian":
            return float(self.sigma2(neighbours))
        from auditlib.simulate.noise import NoiseVariance

        check_neighbours(neighbours)
        if self.noise is not None:
            return NoiseVariance(self.mechanism, float(self.noise))
        count = self.cells_moved(neighbours)  # a Gaussian given by ρ
        return NoiseVariance(self.mechanism, math.sqrt(count / (2 * self.rho)))

    def component(self, neighbours: str) -> tuple[Fraction, int]:
        """(σ², number of sensitivity-1 DG terms one record change moves) for the accountant."""
        return (self.sigma2(neighbours), self.cells_moved(neighbours))

    def loss(self, neighbours: str) -> Any:
        """The query's privacy-loss component (:mod:`auditlib.accounting.losses`): ``count`` =
        the cells one neighbouring change moves."""
        from auditlib.accounting.losses import (
            DiscreteGaussianLoss,
            GaussianLoss,
            GeometricLoss,
            LaplaceLoss,
        )

        count = self.cells_moved(neighbours)
        if self.mechanism == "discrete_gaussian":
            return DiscreteGaussianLoss(self.sigma2(neighbours), count)
        assert self.noise is not None or self.mechanism == "gaussian"
        if self.mechanism == "geometric":
            return GeometricLoss(1 / self.noise, count)  # type: ignore[operator]
        if self.mechanism == "laplace":
            return LaplaceLoss(self.noise, count)  # type: ignore[arg-type]
        sigma = self.noise if self.noise is not None else math.sqrt(count / (2 * self.rho))
        return GaussianLoss(sigma, count)

    def _require_discrete_gaussian(self) -> None:
        if self.mechanism != "discrete_gaussian":
            raise InvalidParameterError(
                f"Invalid allocation for this computation: query {self.query!r} at "
                f"{self.geolevel} ({self.where or 'shipped'}) adds {self.mechanism} noise; this "
                "needs discrete Gaussian noise (σ² or ρ) on every query; the loss components of "
                "any mechanism are Allocation.losses (Allocation.accounting_components), what "
                "every dpaudit command composes"
            )


@dataclass(frozen=True)
class Allocation:
    """A shipped allocation: every query budget, in the file's (hierarchy) order."""

    allocation_id: str
    product: str
    source: str
    queries: tuple[QueryBudget, ...] = field(repr=False)
    #: the neighbour relation an allocation file fixes (None: either, as for the shipped ones)
    neighbours: str | None = None

    def check_relation(self, neighbours: str) -> str:
        """``neighbours``, or an error if the allocation file fixes another relation."""
        check_neighbours(neighbours)
        if self.neighbours is not None and neighbours != self.neighbours:
            raise InvalidParameterError(
                f"Invalid neighbours: {neighbours!r}; allocation file {self.allocation_id!r} "
                f"is accounted under {self.neighbours!r} (its neighbours column); use "
                f"--neighbours {self.neighbours} (audit.neighbours in a spec)"
            )
        return neighbours

    def mechanisms(self) -> tuple[str, ...]:
        """The noise mechanisms of the allocation's queries (shipped: discrete Gaussian only)."""
        return tuple(dict.fromkeys(q.mechanism for q in self.queries))

    def require_discrete_gaussian(self) -> None:
        """Refuse an allocation with a query of another noise than the discrete Gaussian."""
        for q in self.queries:
            q._require_discrete_gaussian()

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
        self.check_relation(neighbours)
        return [q.component(neighbours) for q in self.select(universe, region, geolevel)]

    def losses(
        self,
        neighbours: str,
        universe: str = "persons",
        region: str = "US",
        geolevel: str | None = None,
    ) -> list[Any]:
        """Privacy-loss components of every query (any mechanism), for
        :class:`~auditlib.accounting.composition.PrivacyLossComposition`."""
        self.check_relation(neighbours)
        return [q.loss(neighbours) for q in self.select(universe, region, geolevel)]

    def accounting_components(
        self,
        neighbours: str,
        universe: str = "persons",
        region: str = "US",
        geolevel: str | None = None,
    ) -> list[Any]:
        """What the accountant composes of a selection: discrete Gaussian (σ², count) pairs when
        every query adds discrete Gaussian noise (the shipped allocations), else loss components
        of each query (:meth:`losses`)."""
        if all(q.mechanism == "discrete_gaussian" for q in self.select(universe, region, geolevel)):
            return list(self.components(neighbours, universe, region, geolevel))
        return self.losses(neighbours, universe, region, geolevel)

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


def load_allocation(allocation_id: str) -> Allocation:
    """A shipped allocation by id (see :data:`ALLOCATION_FILES`), or the allocation file at the
    path ``allocation_id`` (``.csv`` or ``.toml``: :mod:`auditlib.allocation_file`)."""
    from auditlib.allocation_file import is_allocation_path, read_allocation_file

    if allocation_id in ALLOCATION_FILES:
        return _load_shipped(allocation_id)
    if is_allocation_path(allocation_id):
        return _from_file(read_allocation_file(allocation_id))
    raise UnknownNameError(
        f"Unknown allocation: {allocation_id!r}; allowed: {', '.join(ALLOCATION_FILES)}, or the "
        "path of an allocation file (.csv or .toml, see docs/guide.md)"
    )


def _from_file(parsed: Any) -> Allocation:
    """The allocation of a checked file (:class:`auditlib.allocation_file.AllocationFile`)."""
    queries = []
    for r in parsed.rows:
        if r.noise_column == "rho":
            rho, noise = r.value, None
        else:
            # a file giving the noise fixes its relation, hence each query's sensitivity
            moved = r.sensitivity or (1 if parsed.neighbours == "add_remove" else 2)
            noise = r.value
            if r.mechanism in ("geometric", "laplace"):
                rho = (moved / noise) ** 2 / 2  # pure (moved/b)-DP implies this zCDP
            elif r.mechanism == "gaussian":
                rho = moved / (2 * noise * noise)
            else:
                rho = moved / (2 * noise)
        queries.append(
            QueryBudget(
                product=r.product,
                universe=r.universe,
                region=r.region,
                geolevel=r.geolevel,
                query=r.query,
                histogram=r.histogram,
                n_cells=r.cells,
                rho=rho,
                mechanism=r.mechanism,
                noise=noise,
                sensitivity=r.sensitivity,
                where=r.where,
            )
        )
    return Allocation(
        allocation_id=parsed.origin,
        product=queries[0].product or "allocation file",
        source=parsed.origin,
        queries=tuple(queries),
        neighbours=parsed.neighbours,
    )


def allocation_digest(allocation_id: str) -> str | None:
    """SHA-256 of an allocation file's bytes (``None`` for a shipped id, or no file): run ids that hash the
    path alone would resume a run into a store computed from an earlier version of the file."""
    import hashlib
    from pathlib import Path

    path = Path(allocation_id)
    if allocation_id in ALLOCATION_FILES or not path.is_file():
        return None
    return hashlib.sha256(path.read_bytes()).hexdigest()


def allocation_label(allocation_id: str) -> str:
    """A path-free name of an allocation: a shipped id as it is; an allocation file as its file
    name and the first 16 hex digits of the SHA-256 of its bytes (``mine.csv@sha256:0123…``), what
    a store and its report record instead of the path (which says where a file was, on one
    machine, and not what it held)."""
    from pathlib import Path

    digest = allocation_digest(allocation_id)
    if digest is None:
        return allocation_id
    return f"{Path(allocation_id).name}@sha256:{digest[:16]}"


def export_allocation(allocation_id: str) -> str:
    """A shipped allocation (or an allocation file) as the CSV of an allocation file: exact ρ of
    every query, no neighbour relation, so it reads back to the same numbers under both."""
    from auditlib.allocation_file import format_csv

    alloc = load_allocation(allocation_id)
    rows = []
    for q in alloc.queries:
        noise_column = "rho" if q.noise is None else _NOISE_COLUMN[q.mechanism]
        rows.append(
            {
                "universe": q.universe,
                "region": q.region,
                "geolevel": q.geolevel,
                "query": q.query,
                "histogram": q.histogram,
                "cells": q.n_cells,
                "mechanism": q.mechanism,
                noise_column: q.rho if q.noise is None else q.noise,
                "sensitivity": q.sensitivity,
                "neighbours": alloc.neighbours,
                "product": q.product,
            }
        )
    return format_csv(rows)


#: the column a file gives each mechanism's noise in
_NOISE_COLUMN = {
    "discrete_gaussian": "sigma2",
    "geometric": "scale",
    "laplace": "scale",
    "gaussian": "sigma",
}


@cache
def _load_shipped(allocation_id: str) -> Allocation:
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
