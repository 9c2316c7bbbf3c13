"""What the studies of TopDown on ``pl94`` states share (``amc_coverage.py``, ``bench_topdown.py``,
``bench_topdown_rounding.py``): the audit's default hierarchy and the ``pl94_2021_production``
queries the ``pl94`` schema expresses."""

from __future__ import annotations

from typing import Any

from auditlib.allocations import load_allocation
from auditlib.geography.schema import schema
from auditlib.simulate.topdown import allocation_measured, unexpressible_queries

LEVELS = ("State", "County", "Tract", "Block_Group", "Block")
FANOUTS = (3, 6, 3, 8)


def measured_for(neighbours: str) -> list[list[tuple[str, float]]]:
    """Per level, the ``pl94_2021_production`` queries as the ``pl94`` schema names them, with
    their σ² under ``neighbours``; the queries it cannot express (``hhgq``, ``hhinstlevels``) left
    out."""
    sch = schema("pl94")
    alloc = load_allocation("pl94_2021_production")
    kw: dict[str, Any] = {
        "attribute_aliases": {"cenrace": "race"},
        "detailed_as": " * ".join(sch.attribute_names),
    }
    skip = unexpressible_queries(alloc, LEVELS, sch.query_names, **kw)  # hhgq, hhinstlevels
    return allocation_measured(alloc, LEVELS, sch.query_names, neighbours, skip=skip, **kw)
