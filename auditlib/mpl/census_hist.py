"""Census releases of block-histogram databases under test: TopDown, Flaxman's ADPC and RDPC.

The databases are :class:`~auditlib.simulate.neighbours_hist.HistogramDatabase` values (one state's
block histograms, :func:`histogram_database` a small default) and their neighbours; each release's
count is sampled through :func:`auditlib.simulate.direct.released_values`:

* :func:`topdown_count` — a block (or any level's) count of the TopDown-style release of one state,
  D′ = a person moved into the unit from another block. No closed form: an
  :class:`AccountedMechanism` whose bound is the certified ε(δ) of the discrete Gaussian measurements
  the move shifts (post-processing cannot increase loss), turned into a pointwise bound on the
  loss at outputs of probability ≥ p_min (:meth:`AccountedMechanism.pointwise_bound`).
* :func:`adpc_count` — Flaxman's ADPC block count, exact law by convolution (a
  :class:`~auditlib.mpl.catalogue.KnownMechanism`; ε*_C < ε on a bounded C).
* :func:`rdpc_count` — Flaxman's RDPC count of any level, rounded; bounded by ε (composition of
  the levels), no exact law.

The counts of a :class:`~auditlib.geography.flaxman.FlaxmanPopulation` (allocation, GDPC) are in
:mod:`auditlib.mpl.census`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import schema as schema_by_name
from auditlib.mechanisms import TwoSidedGeometric
from auditlib.mechanisms.base import positive_finite
from auditlib.mpl.catalogue import KnownMechanism
from auditlib.mpl.census import PAIR_KINDS, _entry
from auditlib.mpl.dpl import Region
from auditlib.mpl.protocol import MechanismUnderTest
from auditlib.simulate.direct import Hierarchical, Release, Target, TopDown, released_values
from auditlib.simulate.neighbours_hist import (
    HistogramDatabase,
    HistogramPair,
    accounting_components,
    neighbour,
)
from auditlib.simulate.neighbours_hist import move_person as move_in_histogram
from auditlib.simulate.topdown import StateHierarchy

#: δ grid over which :meth:`AccountedMechanism.pointwise_bound` takes the best bound
POINTWISE_DELTAS = np.geomspace(1e-14, 1e-1, 27)


@dataclass(frozen=True)
class ReleaseCountSampler:
    """The released value of (``level``, ``unit``, ``query`` cell ``cell``) of a histogram database
    under ``release`` (:func:`auditlib.simulate.direct.released_values`), times ``scale`` and rounded
    to an integer: ADPC's values on ℤ/P with ``scale`` = P exactly, RDPC's real values rounded to
    the nearest count (post-processing: the loss can only shrink)."""

    release: Release
    level: str | int
    unit: int
    query: str = "total"
    cell: int = 0
    scale: int = 1

    def __call__(self, db: Any, n: int, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        if not isinstance(db, HistogramDatabase):
            raise InvalidParameterError(
                f"Invalid input: {type(db).__name__}; this census release runs on a "
                "HistogramDatabase."
            )
        v = released_values(
            self.release,
            db,
            n,
            rng,
            level=self.level,
            unit=self.unit,
            query=self.query,
            cell=self.cell,
        )
        return np.rint(v * self.scale).astype(np.int64)


@dataclass(frozen=True, eq=False)
class AccountedMechanism:
    """A census release under test whose loss is *bounded*, not known: no exact ε*_C.

    ``epsilon_of_delta(δ)`` is a certified upper bound on ε(δ) of what is composed into the released
    value, over all ``pairs`` (for a pure ε-DP release: ε for every δ). A pointwise loss follows:
    (ε, δ)-DP gives P_D(t) ≤ e^ε P_D′(t) + δ for the event {t}, hence for every output t with
    P_D(t), P_D′(t) ≥ p_min

        ℓ(t) ≤ ε(δ) + log(1 + δ / p_min)          (both directions: the relation is symmetric),

    and so ε*_C ≤ :meth:`pointwise_bound` on any C where both laws are ≥ p_min. MPL's lower bound
    must not exceed it (a cross-check of release and accounting, not a coverage experiment).
    """

    mechanism: MechanismUnderTest
    pairs: tuple[tuple[Any, Any], ...]
    region: Region
    epsilon_of_delta: Callable[[float], float]
    components: tuple[tuple[tuple[float, int], ...], ...]  # per pair: (σ², count) composed
    note: str

    def pointwise_bound(self, p_min: float) -> float:
        """min over δ (0 and :data:`POINTWISE_DELTAS`) of ε(δ) + log(1 + δ/p_min): the largest |ℓ(t)| at outputs of probability
        ≥ ``p_min`` under both databases."""
        p = positive_finite("p_min", p_min)
        return float(
            min(
                self.epsilon_of_delta(float(d)) + math.log1p(d / p)
                for d in (0.0, *POINTWISE_DELTAS)
            )
        )


def histogram_database(
    counts: Sequence[int] = (3, 1, 2, 4), fanouts: Sequence[int] = (2, 2)
) -> HistogramDatabase:
    """A small one-state database of total counts: levels State, County, Block, ``fanouts``
    children per unit, ``counts`` people in the blocks."""
    levels = ("State", "County", "Block")[: len(fanouts) + 1]
    h = StateHierarchy.from_fanouts(levels, fanouts)
    hist = np.asarray(counts, dtype=np.int64)[:, None]
    return HistogramDatabase(schema_by_name("total"), levels, h.parents, hist, 1)


def _hist_pairs(
    db: HistogramDatabase, unit: int, cell: int, kinds: Sequence[str]
) -> tuple[HistogramPair, ...]:
    """One person added to block ``unit`` (cell ``cell``), removed from it, or moved into it from
    the last other non-empty block."""
    others = [b for b in range(db.n_blocks) if b != unit and db.histograms[b, cell] > 0]
    out = []
    for k in kinds:
        if k == "move":
            if not others:
                raise InvalidParameterError(
                    f"Invalid pair 'move': no other block has people in cell {cell}."
                )
            out.append(neighbour(db, "move", block=unit, cell=cell, other_block=others[-1]))
        else:
            out.append(neighbour(db, k, block=unit, cell=cell))
    return tuple(out)


def topdown_count(
    measured: Sequence[Sequence[tuple[str, float]]] | None = None,
    *,
    db: HistogramDatabase | None = None,
    level: str | int = -1,
    unit: int = 0,
    query: str = "total",
    cell: int = 0,
    sources: Sequence[int] | None = None,
    radius: int = 3,
    tol: float = 1e-3,
) -> AccountedMechanism:
    """The released count of a TopDown-style release (``measured``: per level of ``db``, top first,
    its (query, σ²)) under D vs D′ = one person of block ``b`` moved into the chosen unit's block,
    for every ``b`` in ``sources`` (default: every other non-empty block of the state).

    No closed form: ``epsilon_of_delta`` is the certified ε(δ) of the discrete Gaussian
    measurements the move shifts by ±1 (:func:`~auditlib.simulate.neighbours_hist.
    accounting_components`, :class:`~auditlib.accounting.DiscreteGaussianComposition`), the worst
    pair's; post-processing cannot exceed it. Only moves inside the state are offered: the state
    total is invariant (released exactly), so adding or removing a person is not covered by the
    measurements' accounting. ``db`` defaults to :func:`histogram_database`; ``level`` -1 means the
    blocks; C is the chosen count ± ``radius`` (t ≥ 0)."""
    from auditlib.accounting import DiscreteGaussianComposition

    d = histogram_database() if db is None else db
    if d.n_top != 1:
        raise InvalidParameterError(
            f"Invalid db: {d.n_top} top units; TopDown runs one state (HistogramDatabase.state)"
        )
    if measured is None:
        measured = [[("total", 1.0)], [("total", 2.0)], [("total", 4.0)]][: len(d.levels)]
    release = TopDown.of(measured, tol)
    lev = d.level_index(len(d.levels) - 1 if level == -1 else level)
    target = Target.check(d, lev, unit, query, cell)
    blocks = np.flatnonzero(d.unit_of_block(np.arange(d.n_blocks), lev) == target.unit)
    into = int(blocks[0])
    full = d.schema.cell_query_index(target.query)
    dcell = int(np.flatnonzero(full == target.cell)[0])
    if sources is None:
        sources = [
            b
            for b in range(d.n_blocks)
            if d.histograms[b, dcell] > 0 and int(d.unit_of_block(b, lev)) != target.unit
        ]
    if not sources:
        raise InvalidParameterError("Invalid sources: no block outside the unit has anyone to move")
    pairs = [move_in_histogram(d, int(b), dcell, into, dcell) for b in sources]
    comps = tuple(tuple(accounting_components(p, release.measured)) for p in pairs)
    accountants = [DiscreteGaussianComposition(list(c)) for c in comps]

    def eps_of_delta(delta: float) -> float:
        if delta <= 0:
            return math.inf  # discrete Gaussians are not pure DP
        return max(float(np.max(a.epsilon(delta).upper)) for a in accountants)

    c0 = target.truth(d)
    sampler = ReleaseCountSampler(release, lev, target.unit, target.query, target.cell)
    return AccountedMechanism(
        mechanism=MechanismUnderTest("topdown_count", sampler, "discrete"),
        pairs=tuple((p.d, p.d_prime) for p in pairs),
        region=Region.integers((max(c0 - radius, 0), c0 + radius)),
        epsilon_of_delta=eps_of_delta,
        components=comps,
        note="no exact loss: bounded by the composed measurements' certified eps(delta)",
    )


def _geometric_sum_logpmf(eps: float, p: int) -> tuple[npt.NDArray[np.float64], int]:
    """log pmf of the sum of ``p`` independent G(ε/p) on −p·M..p·M (by convolution) and its offset
    p·M; each G is cut at |k| ≤ M with the mass beyond below 1e-30 (dropped)."""
    z = eps / p
    m = math.ceil((69.1 + max(0.0, -math.log1p(-math.exp(-z)))) / z)  # α^M/(1−α) < 1e-30
    k = np.arange(-m, m + 1)
    one = np.asarray(TwoSidedGeometric(z).pmf(k), dtype=np.float64)
    out = one
    for _ in range(p - 1):
        out = np.convolve(out, one)
    with np.errstate(divide="ignore"):
        return np.log(out), p * m


def adpc_count(
    epsilon: float,
    *,
    n_runs: int = 4,
    db: HistogramDatabase | None = None,
    unit: int = 0,
    pairs: Sequence[str] = PAIR_KINDS,
    radius: int = 3,
) -> KnownMechanism:
    """Flaxman's ADPC block count (the mean of P = ``n_runs`` GDPC runs at ε/P) under D vs D′.

    Exact law: released = c + S/P with S the sum of P independent G(ε/P), whose pmf is computed by
    convolution (mass dropped < 1e-30 per term); outputs are encoded as P·released (integers).
    A person changes c by ±1, i.e. S by ±P: ℓ(t) = |ln p_S(t − Pc) − ln p_S(t − Pc′)|, at most ε
    (composition of P runs at ε/P) and approaching ε only far in the tails, so ε*_C < ε on a
    bounded C. ``db`` defaults to :func:`histogram_database`; C = P·(c ± ``radius``)."""
    eps = positive_finite("epsilon", epsilon)
    if isinstance(n_runs, bool) or not isinstance(n_runs, int) or n_runs < 1:
        raise InvalidParameterError(f"Invalid n_runs: {n_runs!r}; an integer >= 1")
    d = histogram_database() if db is None else db
    lev = len(d.levels) - 1
    t = Target.check(d, lev, unit, "total", 0)
    sampler = ReleaseCountSampler(Hierarchical("adpc", eps, n_runs), lev, t.unit, scale=n_runs)
    logp, off = _geometric_sum_logpmf(eps, n_runs)

    def logpmf_of(tt: npt.NDArray[np.int64], c: int) -> npt.NDArray[np.float64]:
        s = np.asarray(tt, dtype=np.int64) - n_runs * c + off
        ok = (s >= 0) & (s < logp.size)
        return np.where(ok, logp[np.clip(s, 0, logp.size - 1)], -np.inf)

    hp = _hist_pairs(d, t.unit, 0, pairs)
    return _entry(
        f"adpc_count_p{n_runs}",
        sampler,
        logpmf_of,
        tuple((p.d, p.d_prime) for p in hp),
        radius,
        False,
        eps,
        eps,
        count=lambda db: t.truth(db),
        scale=n_runs,
    )


def rdpc_count(
    epsilon: float,
    *,
    db: HistogramDatabase | None = None,
    level: str | int = -1,
    unit: int = 0,
    pairs: Sequence[str] = PAIR_KINDS,
    radius: int = 3,
) -> AccountedMechanism:
    """Flaxman's RDPC count of one unit (raked top-down), rounded to an integer, under D vs D′.

    No exact law (raking divides by a noisy family sum): the loss is bounded by the composition of
    the levels, J + 1 measurements at ε/(J + 1) of which a person changes one count each — ε-DP,
    so ``epsilon_of_delta`` is ε for every δ (an upper bound, not attained in general).
    ``db`` defaults to :func:`histogram_database`; C = the count ± ``radius`` (t ≥ 0 not assumed)."""
    eps = positive_finite("epsilon", epsilon)
    d = histogram_database() if db is None else db
    lev = d.level_index(len(d.levels) - 1 if level == -1 else level)
    t = Target.check(d, lev, unit, "total", 0)
    block = int(np.flatnonzero(d.unit_of_block(np.arange(d.n_blocks), lev) == t.unit)[0])
    hp = _hist_pairs(d, block, 0, pairs)
    c0 = t.truth(d)
    sampler = ReleaseCountSampler(Hierarchical("rdpc", eps), lev, t.unit)
    return AccountedMechanism(
        mechanism=MechanismUnderTest("rdpc_count", sampler, "discrete"),
        pairs=tuple((p.d, p.d_prime) for p in hp),
        region=Region.integers((c0 - radius, c0 + radius)),
        epsilon_of_delta=lambda _delta: eps,
        components=(),
        note="no exact loss: bounded by the composition of the J + 1 levels at eps/(J + 1)",
    )
