"""The audit's MPL route over the production schemas (``population.attributes``): the count it tests
is a query of the schema's own allocation, its exact loss agrees with the accounting's certified
hockey-stick curve of that one measurement, and an allocation of another product is refused at spec
load."""

from __future__ import annotations

import math
from typing import Any

import pytest

from auditlib.accounting import DiscreteGaussianComposition
from auditlib.allocations import load_allocation
from auditlib.exceptions import SpecError
from auditlib.geography.schema import schema
from flows.spec import parse_spec


def _spec(attributes: str, allocation: str, **mpl: Any) -> Any:
    return parse_spec(
        {
            "audit": {"allocation": allocation, "seed": 4},
            "population": {"attributes": attributes},
            "release": {"kind": "allocation"},
            "mpl": {"enabled": True, "n": 2000, "n_confidence": 2000, "fdp": False, **mpl},
        }
    )


@pytest.mark.parametrize(
    ("attributes", "allocation", "geolevel"),
    [
        ("pl94_production", "pl94_2021_production", "Block"),
        ("dhc_production", "dhc_2023_production", "County"),
    ],
)
def test_mpl_of_a_production_schema_agrees_with_the_accounting(
    attributes: str, allocation: str, geolevel: str
) -> None:
    from auditlib.mpl.audit import mpl_geolevel
    from flows.experiments.mpl_coverage import mpl_task_settings

    spec = _spec(attributes, allocation)
    r = mpl_geolevel(geolevel, spec.geolevels.index(geolevel), **mpl_task_settings(spec))
    # the tested count: the geolevel's least noisy query of the allocation, one of the schema's
    qs = load_allocation(allocation).select("persons", "US", geolevel)
    qb = max(qs, key=lambda q: q.rho)
    sch = schema(attributes)
    assert sch.n_query_cells(qb.query) == qb.n_cells
    assert r["name"].endswith(f":{geolevel}:{qb.query}")
    s2 = 1 / (2 * float(qb.rho))  # add/remove: sigma2 = 1 / (2 rho_q), from the allocation's file
    assert r["sigma2"] == pytest.approx(s2, rel=1e-12)
    # exact loss over C = count +- r: (2r + 1) / (2 sigma2), r = ceil(radius_sd sigma)
    radius = math.ceil(spec.mpl.radius_sd * math.sqrt(s2))
    assert r["epsilon_c"] == pytest.approx((2 * radius + 1) / (2 * s2), rel=1e-9)
    # the exact hockey-stick delta(eps) of the count (D vs D': it moves by one) is the accounting's
    # certified curve of that one discrete Gaussian measurement, sensitivity 1
    acc = DiscreteGaussianComposition([(s2, 1)]).delta(list(spec.mpl.delta_epsilons))
    for d, lo, hi in zip(r["delta_exact"], acc.lower, acc.upper, strict=True):
        assert lo - 1e-9 <= d <= hi + 1e-9
    assert r["lb"] <= r["epsilon_c"]  # the lower bound at this seed does not pass the exact loss


@pytest.mark.parametrize(
    ("attributes", "allocation", "named"),
    [
        ("dhc_production", "pl94_2021_production", "'detailed' of 2,016 cells"),
        ("pl94_production", "dhc_2023_production", "'gq_constr_groups * age_10_groups'"),
    ],
)
def test_mpl_over_a_schema_of_another_product_is_refused_at_spec_load(
    attributes: str, allocation: str, named: str
) -> None:
    with pytest.raises(SpecError) as err:
        _spec(attributes, allocation)
    msg = str(err.value)
    assert f"population.attributes = {attributes!r} has no query {named}" in msg
    assert "set population.attributes to its schema" in msg
