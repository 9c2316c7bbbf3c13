"""A level's fit below the State, by independent parts (:mod:`auditlib.simulate.sparse_fit`): the
objective and the constraints separate by parent (a child's rows, its groups and its parent's
segments hold no other parent's children), so the fit is solved in sub-problems of whole parents
of about :data:`PART_VARIABLES` variables each, each converging at its own pace and by the route
it needs.

The parts may be solved in other processes: ``pool`` is anything with ``map(fn, iterable)``
returning the results in order (a :class:`concurrent.futures.ProcessPoolExecutor`, or
``flows.runtime.part_pool.PartPool``, which also counts their CPU). A part's solution depends on
its own data alone, so the fit, and the release, are the same in any pool and without one
(``tests/unit/test_sparse_parts.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from auditlib.simulate.sparse_fit import Term, _Fit

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: below the State the fit separates by parent: it is solved in parts of whole parents of about
#: this many variables (each converging at its own pace, each by the route it needs)
PART_VARIABLES = 30_000

#: the statistics a part's solve leaves on its problem (:class:`~.sparse_fit._Fit`)
STATS = ("route", "outer", "rho", "newton", "cg", "ratio", "working", "sets", "mu")


class PartMap(Protocol):
    """Where parts are solved: results in the order of ``items``, every item submitted when
    ``map`` is called (as :meth:`concurrent.futures.Executor.map` does)."""

    def map(self, fn: Any, items: Iterable[Any]) -> Iterator[Any]: ...


def ranges(parent: IntArray | None, n: int) -> list[tuple[int, int]]:
    """The variables' ranges ``[a, b)`` of whole parents, of about :data:`PART_VARIABLES` each:
    one range unless ``parent`` (of each variable's unit) is given, non-decreasing, and there are
    more variables."""
    if parent is None or n <= PART_VARIABLES or (np.diff(parent) < 0).any():
        return [(0, n)]
    ends = np.append(np.flatnonzero(np.diff(parent)) + 1, n)
    parts, a = [], 0
    for e in ends.tolist():
        if e - a >= PART_VARIABLES:
            parts.append((a, e))
            a = e
    if a < n:
        parts.append((a, n))
    return parts


def solve_part(job: tuple[_Fit, list[Term], dict[str, Any]]) -> tuple[FloatArray, int, dict]:
    """One part's fit (in whichever process runs it): its values, steps and statistics."""
    sub, terms, kw = job
    x, k = sub._solve(terms, **kw)
    return x, k, {name: getattr(sub, name) for name in STATS}


def start_parts(
    fit: _Fit,
    terms: list[Term],
    parts: list[tuple[int, int]],
    pool: PartMap | None,
    **kw: Any,
) -> Callable[[], tuple[FloatArray, int]]:
    """The parts given to ``pool`` now (its ``map`` submits them at once), and what collects
    them: the values, and the iterations, the largest of the parts'; ``fit`` then takes the parts'
    statistics (the largest, or the sums of Newton and conjugate-gradient steps). Without a pool
    the parts are solved here, one after another, when collected."""
    groups_of: list[IntArray] = []

    def jobs() -> Iterator[tuple[_Fit, list[Term], dict[str, Any]]]:
        # made as they are taken: here one part's sub-problem at a time (a pool takes them all)
        for a, b in parts:
            sub, sub_terms, groups = fit._part(terms, a, b)
            groups_of.append(groups)
            yield sub, sub_terms, kw

    done = map(solve_part, jobs()) if pool is None else pool.map(solve_part, jobs())

    def collect() -> tuple[FloatArray, int]:
        x = np.zeros(fit.unit.size)
        fit.mu = np.zeros(0 if fit.lower is None else fit.lower.size)
        its, routes = 0, set()
        fit.outer = fit.newton = fit.cg = fit.working = fit.sets = 0
        fit.ratio = fit.rho = 0.0
        for i, ((a, b), (xs, k, st)) in enumerate(zip(parts, done, strict=True)):
            groups = groups_of[i]
            x[a:b] = xs
            its = max(its, k)
            routes.add(st["route"])
            fit.outer, fit.rho = max(fit.outer, st["outer"]), max(fit.rho, st["rho"])
            fit.newton, fit.cg = fit.newton + st["newton"], fit.cg + st["cg"]
            fit.ratio = max(fit.ratio, st["ratio"])
            fit.working, fit.sets = max(fit.working, st["working"]), max(fit.sets, st["sets"])
            if groups.size:
                fit.mu[groups] = st["mu"]
        fit.route = "+".join(sorted(routes))
        return x, its

    return collect
