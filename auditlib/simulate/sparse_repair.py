"""The last fractions of a person moved so that a sparse TopDown fit
(:mod:`auditlib.simulate.sparse_fit`) meets every group-quarters lower bound exactly (up to
floating point) before rounding."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def repair_lower(
    x: FloatArray,
    segment: IntArray,
    group: IntArray,
    lower: FloatArray,
    pair: IntArray,
    *,
    columns: bool,
) -> FloatArray:
    """Fitted values meeting every group's lower bound, the segment sums unchanged.

    Within each ``pair`` of groups (the children of one parent in one unit type), the groups above
    their bound give up a share ``θ`` of their excess, cell by cell in proportion to their values,
    and the groups below it receive their deficits: with ``columns`` (children of a parent) each
    segment's removed mass goes to the deficient groups' variables in that segment, in proportion to
    their deficits (every group of a pair has one variable in each of the pair's segments); without
    (the state: one segment) the deficits are spread evenly over the group's variables. Feasible
    when each pair's groups hold at least the sum of their bounds — true when the parent met its own
    bound (the sum of its children's)."""
    n_g = lower.size
    s = np.bincount(group, weights=x, minlength=n_g)
    deficit = np.maximum(lower - s, 0.0)
    if not (deficit > 0).any():
        return x
    excess = np.maximum(s - lower, 0.0)
    n_p = int(pair.max()) + 1
    need = np.bincount(pair, weights=deficit, minlength=n_p)
    have = np.bincount(pair, weights=excess, minlength=n_p)
    if not columns:  # the state: one pool, any type gives to any type
        need[:] = need.sum()
        have[:] = have.sum()
    # a shortfall within floating-point noise of the pair's people (the fit meets a parent's bound
    # only to rounding: a parent at exactly its children's bounds can leave 1e-9 of a person
    # missing and nothing to give) is no infeasibility: what can be given is given, the rest is
    # left to the integer repair (fix_lower) after rounding
    held = np.bincount(pair, weights=s, minlength=n_p)
    if not columns:
        held[:] = held.sum()
    slack = 1e-9 * np.maximum(held, 1.0) + 1e-6
    if (need > have + slack).any():
        p = int(np.flatnonzero(need > have + slack)[0])
        raise InvalidParameterError(
            f"Infeasible lower bounds: groups of pair {p} need {need[p]:g} more people than the "
            f"others can give ({have[p]:g}); the parent must meet the sum of its children's bounds"
        )
    given = np.minimum(need, have)
    scale = np.divide(given, need, out=np.zeros_like(need), where=need > 0)  # 1 unless short
    deficit = deficit * scale[pair]
    need = given
    theta = np.divide(need, have, out=np.zeros_like(need), where=have > 0)
    gp = pair[group]
    share = np.divide(excess, s, out=np.zeros_like(s), where=s > 0)
    removed = theta[gp] * share[group] * x
    out = x - removed
    receiving = deficit[group] > 0
    if columns:
        r_seg = np.bincount(segment, weights=removed, minlength=int(segment.max()) + 1)
        frac = np.divide(deficit, need[pair], out=np.zeros_like(deficit), where=need[pair] > 0)
        out[receiving] += r_seg[segment[receiving]] * frac[group[receiving]]
    else:
        n_var = np.bincount(group, minlength=n_g)
        out[receiving] += (deficit / np.maximum(n_var, 1))[group[receiving]]
    return np.maximum(out, 0.0)
