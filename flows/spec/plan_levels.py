"""What every plan builder shares: the regions that can hold data, and the queries each level
measures with their σ² (a query measured twice: its combined precision)."""

from __future__ import annotations

from collections.abc import Iterator

from auditlib.geography import NATIONAL
from auditlib.geography.schema import AttributeSchema
from auditlib.simulate import QueryPlan
from auditlib.simulate.noise import NoiseVariance
from flows.spec.model import AuditSpec
from flows.spec.sources import topdown_measured


def state_levels(
    states: list[str], levels: tuple[str, ...], has_nation: bool, empty: list[tuple[int, int]]
) -> Iterator[tuple[int, int, str, str, bool]]:
    """(state index, geolevel index, state label, geolevel, is the nation) of every region that can
    hold data: the nation (first, if present) only at the national level, states at every other
    level; the other regions are appended to ``empty``."""
    for si, label in enumerate(states):
        nation = has_nation and si == 0
        for gi, g in enumerate(levels):
            if nation != (g == NATIONAL):
                empty.append((si, gi))
                continue
            yield si, gi, label, g, nation


def measured_queries(spec: AuditSpec) -> list[list[tuple[str, float]]]:
    """Per simulated geolevel of a TopDown spec, the queries it measures with their σ²."""
    a = spec.audit
    return topdown_measured(
        a.allocation,
        spec.geolevels,
        spec.population.attributes,
        a.neighbours,
        a.universe,
        a.region,
        on_spine=spec.population.kind == "spine",
        spine_top=bool(spec.release.lowest_level),
    )


def by_level(
    geolevels: tuple[str, ...], measured: list[list[tuple[str, float]]]
) -> dict[str, tuple[tuple[str, float], ...]]:
    """Measurements per level (in ``geolevels`` order) keyed by the level's name."""
    return {g: tuple(level) for g, level in zip(geolevels, measured, strict=True)}


def measured_query_plans(
    measured: list[list[tuple[str, float]]], sch: AttributeSchema
) -> tuple[tuple[str, ...], list[tuple[tuple[int, QueryPlan], ...]]]:
    """The queries a TopDown release measures, and per level (query index, plan) with σ² of the
    combined precision of a query measured more than once."""
    queries = tuple(dict.fromkeys(q for level in measured for q, _ in level))
    level_queries = []
    for level in measured:
        prec: dict[str, float] = {}
        once: dict[str, float] = {}  # a query measured once with other noise: its NoiseVariance
        for q, sigma2 in level:  # a query measured twice: its combined precision
            prec[q] = prec.get(q, 0.0) + 1.0 / sigma2
            once[q] = sigma2 if q not in once else 1.0 / prec[q]
        level_queries.append(
            tuple(
                (
                    queries.index(q),
                    QueryPlan(
                        q,
                        sch.n_query_cells(q),
                        sch.n_query_cells(q),
                        once[q] if isinstance(once[q], NoiseVariance) else 1 / prec[q],
                    ),
                )
                for q in prec
            )
        )
    return queries, level_queries
