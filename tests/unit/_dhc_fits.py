"""DHC fits for the sparse TopDown's tests: a State fit and a County-level fit over drawn
populations with the production allocation's queries measured, and their KKT conditions checked
from the gradient (``tests/unit/test_sparse_coarse.py``, ``test_sparse_fista.py``)."""

from __future__ import annotations

import numpy as np
from scipy import sparse

from auditlib.allocations import load_allocation
from auditlib.geography.schema import schema
from auditlib.geography.sparse_histograms import cell_type, from_keys, structural_zero
from auditlib.simulate.measured import allocation_measured
from auditlib.simulate.sparse_fit import Term, _Fit

NAME = "dhc_production"
SCH = schema(NAME)


def _state_queries() -> list[tuple[str, float]]:
    levels = ["State", "County", "Tract_Subset", "Block_Group", "Block"]
    measured = allocation_measured(
        load_allocation("dhc_2023_production"), levels, SCH.query_names, "bounded", schema=SCH
    )
    return list(measured[0])


def _draw(
    ages: range, races: tuple[int, ...], people: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """The DHC cells of the given ages and races (every relgq, sex, hispanic), structural zeros
    left out, and ``people`` drawn among them: most in households (relgq < 18), a few in group
    quarters."""
    grids = np.meshgrid(
        np.arange(42), np.arange(2), np.array(list(ages)), np.arange(2), np.array(races),
        indexing="ij",
    )  # fmt: skip
    cell = np.ravel_multi_index(tuple(g.ravel() for g in grids), SCH.shape).astype(np.int64)
    cell = np.sort(cell[~structural_zero(NAME, cell)])
    weight = np.where(cell_type(cell, NAME) == 0, 20.0, 1.0)
    return cell, rng.choice(cell, size=people, p=weight / weight.sum())


def _instance(
    ages: range, races: tuple[int, ...], people: int, seed: int, lower_gq: dict[int, float]
) -> tuple[_Fit, list[Term]]:
    """A State fit over the DHC cells of the given ages and races (every relgq, sex, hispanic),
    structural zeros left out, a population of ``people`` drawn at random, the State's queries
    measured with the production σ², and lower bounds on some group-quarters types."""
    cell, drawn = _draw(ages, races, people, np.random.default_rng(seed))
    keys, counts = np.unique(drawn, return_counts=True)
    truth = from_keys(NAME, keys.astype(np.int64), counts.astype(np.int64), 1)
    group = cell_type(cell, NAME).astype(np.int64)
    lower = np.zeros(int(group.max()) + 1)
    for g, v in lower_gq.items():
        lower[g] = v
    zero = np.zeros(cell.size, dtype=np.int64)
    fit = _Fit(zero, cell, zero, np.array([float(people)]), group, lower)
    terms = fit.measure(truth, _state_queries(), np.random.default_rng(seed + 1))
    return fit, terms


def _normal(terms: list[Term], n: int) -> tuple[sparse.csr_matrix, np.ndarray]:
    """``H = Σ_q w_q Q_qᵀQ_q`` and ``b = Σ_q w_q Q_qᵀ y_q`` of the measurements, built here."""
    hess = sparse.csr_matrix((n, n))
    b = np.zeros(n)
    for t in terms:
        q = sparse.csr_matrix((np.ones(n), (t.inv, np.arange(n))), shape=(t.y.size, n))
        hess = hess + t.weight * (q.T @ q)
        b += t.weight * (q.T @ t.y)
    return hess.tocsr(), b


def _kkt_violation(fit: _Fit, terms: list[Term], x: np.ndarray) -> float:
    """The largest violation of the KKT conditions of ``min ½xᵀHx − bᵀx`` over ``x ≥ 0``,
    ``Σ x = total``, ``Σ_group x ≥ lower``: multipliers τ (total) and ν_g ≥ 0 (bounds) recovered
    from the gradient; stationarity ``∇f = τ + ν_g`` where ``x > 0`` and ``≥`` where ``x = 0``,
    complementarity, feasibility."""
    assert fit.group is not None and fit.lower is not None
    hess, b = _normal(terms, x.size)
    g = hess @ x - b
    grp, low = fit.group, fit.lower
    sums = np.bincount(grp, weights=x, minlength=low.size)
    pos = x > 1e-7
    free_group = sums > low + 1e-6  # bound not active: ν = 0
    tau = float(np.median(g[pos & free_group[grp]]))
    nu = np.zeros(low.size)
    for k in np.flatnonzero(~free_group & (low > 0)):
        m = (grp == k) & pos
        nu[k] = float(np.median(g[m])) - tau if m.any() else 0.0
    shifted = g - tau - nu[grp]
    return max(
        float(np.abs(shifted[pos]).max()),  # stationarity on the positive variables
        float(max(-shifted[~pos].min(initial=0.0), 0.0)),  # and at zero
        float(max(-nu.min(), 0.0)),  # ν ≥ 0
        float(max((low - sums).max(), 0.0)),  # bounds hold
        abs(float(x.sum()) - fit.target[0]),  # the total
        float(max(-x.min(), 0.0)),
    )


def _county_instance(
    units: int, seed: int, *, people: int = 400, level: int = 1
) -> tuple[_Fit, list[Term]]:
    """A County-level fit: ``units`` counties, each (county, cell) a variable for every cell the
    State holds, children summing to the State in every cell (one segment per State cell), a
    lower bound of one person per county and group-quarters type it holds, and the County
    queries of the production allocation measured (their coarse rows one set per county: the
    tests set DENSE_ROWS to send the dual's Newton steps to either solver). ``people`` per unit;
    ``level`` the allocation's level whose queries are measured (4: the Block's)."""
    rng = np.random.default_rng(seed)
    _, drawn = _draw(range(20, 26), (0, 1), people * units, rng)
    where = rng.integers(0, units, size=drawn.size)
    keys, counts = np.unique(where * SCH.n_cells + drawn, return_counts=True)
    truth = from_keys(NAME, keys.astype(np.int64), counts.astype(np.int64), units)
    held, target = np.unique(drawn, return_counts=True)
    unit = np.repeat(np.arange(units, dtype=np.int64), held.size)
    var_cell = np.tile(held.astype(np.int64), units)
    segment = np.tile(np.arange(held.size, dtype=np.int64), units)
    n_types = 25
    key = unit * n_types + cell_type(var_cell, NAME)
    used, group = np.unique(key, return_inverse=True)
    t_key = truth.unit_of_entry() * n_types + cell_type(truth.cells.astype(np.int64), NAME)
    true_sums = np.zeros(used.size)
    np.add.at(true_sums, np.searchsorted(used, t_key), truth.counts)
    g_type = used % n_types
    # one person per group-quarters type a county holds (facilities there): true of the data
    lower = np.where((g_type > 0) & (true_sums > 0), 1.0, 0.0)
    fit = _Fit(unit, var_cell, segment, target.astype(np.float64), group.astype(np.int64), lower,
               g_type.astype(np.int64))  # fmt: skip
    levels = ["State", "County", "Tract_Subset", "Block_Group", "Block"]
    queries = allocation_measured(
        load_allocation("dhc_2023_production"), levels, SCH.query_names, "bounded", schema=SCH
    )[level]
    return fit, fit.measure(truth, list(queries), np.random.default_rng(seed + 1))


def _kkt_segments(fit: _Fit, terms: list[Term], x: np.ndarray) -> float:
    """The largest violation of the KKT conditions with one multiplier ``τ_s`` per segment and
    ``ν_g ≥ 0`` per bounded group, recovered from the gradient as in :func:`_kkt_violation`."""
    assert fit.group is not None and fit.lower is not None
    hess, b = _normal(terms, x.size)
    g = hess @ x - b
    grp, low, seg = fit.group, fit.lower, fit.segment
    sums = np.bincount(grp, weights=x, minlength=low.size)
    pos = x > 1e-7
    free_group = (sums > low + 1e-6) | (low <= 0)
    tau = np.full(fit.target.size, np.nan)
    for s in range(fit.target.size):
        m = (seg == s) & pos & free_group[grp]
        if m.any():
            tau[s] = float(np.median(g[m]))
    nu = np.zeros(low.size)
    for k in np.flatnonzero(~free_group):
        m = (grp == k) & pos & np.isfinite(tau[seg])
        nu[k] = float(np.median(g[m] - tau[seg[m]])) if m.any() else 0.0
    known = np.isfinite(tau[seg])
    shifted = g - np.where(known, tau[seg], 0.0) - nu[grp]
    return max(
        float(np.abs(shifted[pos & known]).max()),
        float(max(-shifted[~pos & known].min(initial=0.0), 0.0)),
        float(max(-nu.min(initial=0.0), 0.0)),
        float(max((low - sums).max(), 0.0)),
        float(np.abs(np.bincount(seg, weights=x, minlength=fit.target.size) - fit.target).max()),
        float(max(-x.min(), 0.0)),
    )
