"""Hockey-stick divergence δ(ε) from samples, for (ε, δ) users: a plug-in estimate and a lower bound.

For one pair (x, x′) with output laws P = A(x), Q = A(x′),

    δ_{x,x′}(ε) = max(H_ε(P‖Q), H_ε(Q‖P)),   H_ε(P‖Q) = sup_E P(E) − e^ε Q(E) = E_P[(1 − e^{ε−L})₊]

with L = ln dP/dQ: the smallest δ for which A is (ε, δ)-DP on this pair. From samples, as MPL does
(Askin, Kutta & Dette, Algorithm 4), in two steps:

1. **Locate** (the n step-1 draws at each input): estimate both pmfs on common cells — the integers
   between the smallest and largest step-1 draw for discrete outputs, equal-width bins (width = the
   pooled sample's Silverman bandwidth) for 1-D continuous ones, plus overflow cells — and, per ε, pick the direction and the event
   E_ε = {cells with p̂ > e^ε q̂} that maximize the plug-in H_ε.
2. **Bound** (the N fresh draws): count the fresh draws in E_ε, k_P and k_Q, and set

       δ_LB(ε) = ( P_low − e^ε Q_high )₊

   with Clopper–Pearson bounds P_low (level α/2, lower) and Q_high (α/2, upper).

Which way it errs. δ_LB is a *finite-sample* lower confidence bound: E_ε is fixed before the fresh
draws are seen and δ(ε) ≥ P(E) − e^ε Q(E) for every event, so P(δ_LB(ε) ≤ δ(ε)) ≥ 1 − α for each
ε (pointwise; for all ε of a grid at once use α / (grid size)). A poorly chosen E_ε and binning only
make it smaller. ``delta_hat`` is the plug-in Σ (p̂ − e^ε q̂)₊ on the fresh draws (maximum over the
two directions): on cells it errs *up* on average (the positive part is convex; with unseen
outputs of one input it can sit far above), and binning continuous outputs errs *down* (coarser
cells can only merge likelihood ratios). The black-box limit of MPL applies: mass ≪ 1/N is unseen.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mpl.checks import check_alpha, check_epsilons
from auditlib.mpl.density import silverman_bandwidth
from auditlib.mpl.protocol import OutputKind, check_kind, check_samples

FloatArray = npt.NDArray[np.float64]

#: Most memory the cell arrays of :func:`hockey_stick` may take: 2 GiB. With m cells and a grid
#: of k values of ε it holds four (m,) count vectors and about six (k, m) arrays (events, their
#: plug-in terms), 8 bytes an entry; m follows the data (up to 4n integers for discrete outputs,
#: range / bandwidth bins for continuous ones). A larger problem is refused before any array is
#: built, naming the memory it would need and the largest ε grid allowed.
MAX_HOCKEY_BYTES = 2 * 2**30


def _check_memory(cells: int, epsilons: int) -> None:
    need = 8 * cells * (4 + 6 * epsilons)
    if need > MAX_HOCKEY_BYTES:
        most = max(0, (MAX_HOCKEY_BYTES // (8 * cells) - 4) // 6)
        raise InvalidParameterError(
            f"Invalid epsilons: {epsilons} values over {cells} cells would need about "
            f"{need / 2**30:.1f} GiB, more than the {MAX_HOCKEY_BYTES / 2**30:g} GiB allowed "
            f"(MAX_HOCKEY_BYTES); the largest epsilon grid allowed here is {most} values"
            + ("" if most else " (the outputs spread over too many cells: use fewer draws)")
        )


def hockey_stick_exact(
    log_p: npt.ArrayLike, log_q: npt.ArrayLike, epsilons: Sequence[float] | npt.ArrayLike
) -> FloatArray:
    """max(H_ε(P‖Q), H_ε(Q‖P)) of two pmfs given as logs on a common support (−inf for 0)."""
    eps = check_epsilons(epsilons)
    _check_memory(int(np.size(log_p)), eps.size)
    p = np.exp(np.asarray(log_p, dtype=np.float64))
    q = np.exp(np.asarray(log_q, dtype=np.float64))
    e = np.exp(eps)[:, None]
    fwd = np.maximum(p[None, :] - e * q[None, :], 0.0).sum(axis=1)
    bwd = np.maximum(q[None, :] - e * p[None, :], 0.0).sum(axis=1)
    return np.asarray(np.maximum(fwd, bwd))


@dataclass(frozen=True, eq=False)
class HockeyStick:
    """δ(ε) of one pair on the grid ``epsilon``: ``delta_hat`` (plug-in, fresh draws),
    ``delta_lb`` (lower bound, level 1 − ``alpha`` per ε), ``direction`` (+1: H_ε(P‖Q) with P the
    first input's law; −1: the reverse), the fresh counts ``k_x``/``k_x_prime`` in the chosen event
    and its size ``event_cells``; ``cell_width`` for binned continuous outputs (else None)."""

    epsilon: FloatArray
    delta_hat: FloatArray
    delta_lb: FloatArray
    direction: npt.NDArray[np.int64]
    k_x: npt.NDArray[np.int64]
    k_x_prime: npt.NDArray[np.int64]
    event_cells: npt.NDArray[np.int64]
    alpha: float
    n: int
    n_confidence: int
    cell_width: float | None


def _cells(
    kind: OutputKind, first: list[npt.NDArray[np.float64]], fresh: list[npt.NDArray[np.float64]]
) -> tuple[list[npt.NDArray[np.int64]], list[npt.NDArray[np.int64]], int, float | None]:
    """Integer cell labels 0..m−1 of all four samples; cells are defined by the step-1 draws."""
    pooled = np.concatenate(first)
    lo, hi = float(pooled.min()), float(pooled.max())
    if kind == "discrete" and hi - lo >= 4 * pooled.size:  # a sparse, wide support: seen values
        values = np.unique(pooled)

        def vlabel(a: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
            i = np.minimum(np.searchsorted(values, a), values.size - 1)
            return np.where(values[i] == a, i, values.size).astype(np.int64)

        return [vlabel(a) for a in first], [vlabel(a) for a in fresh], values.size + 1, None
    if kind == "discrete":
        k = int(hi - lo) + 1  # every integer from the smallest to the largest step-1 draw

        def label(a: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
            i = (a - lo).astype(np.int64)
            return np.where((i >= 0) & (i < k), i, k)  # cell k: outside the step-1 range

        return [label(a) for a in first], [label(a) for a in fresh], k + 1, None
    width = silverman_bandwidth(pooled)
    kb = max(1, int(np.ceil((hi - lo) / width)))

    def blabel(a: npt.NDArray[np.float64]) -> npt.NDArray[np.int64]:
        i = np.floor((a - lo) / width).astype(np.int64) + 1  # bins 1..kb; 0 and kb+1: overflow
        return np.clip(i, 0, kb + 1)

    return [blabel(a) for a in first], [blabel(a) for a in fresh], kb + 2, float(width)


def hockey_stick(
    samples_x: npt.ArrayLike,
    samples_x_prime: npt.ArrayLike,
    fresh_x: npt.ArrayLike,
    fresh_x_prime: npt.ArrayLike,
    epsilons: Sequence[float] | npt.ArrayLike,
    *,
    kind: OutputKind,
    alpha: float = 0.05,
) -> HockeyStick:
    """δ(ε) of the pair from step-1 draws (locate E_ε) and fresh draws (estimate and bound).

    Discrete outputs or 1-D continuous outputs; both step-1 samples the same size n, both fresh
    samples the same size N.
    """
    kind = check_kind(kind)
    a = check_alpha(alpha)
    eps = check_epsilons(epsilons)
    names = ("samples_x", "samples_x_prime", "fresh_x", "fresh_x_prime")
    arrs = []
    for name, s in zip(names, (samples_x, samples_x_prime, fresh_x, fresh_x_prime), strict=True):
        if np.ndim(s) > 1:
            raise InvalidParameterError(
                f"Invalid {name}: shape {np.shape(s)}; the hockey-stick estimate takes discrete "
                "or one-dimensional continuous outputs."
            )
        arrs.append(check_samples(s, kind=kind, dim=1, name=name).astype(np.float64))
    n, big_n = arrs[0].size, arrs[2].size
    if arrs[1].size != n or arrs[3].size != big_n:
        raise InvalidParameterError(
            f"Invalid sample sizes: {arrs[0].size}, {arrs[1].size} (step 1) and {arrs[2].size}, "
            f"{arrs[3].size} (fresh); each pair of samples must have equal sizes."
        )
    first, fresh, m, width = _cells(kind, arrs[:2], arrs[2:])
    _check_memory(m, eps.size)
    p1 = np.bincount(first[0], minlength=m) / n
    q1 = np.bincount(first[1], minlength=m) / n
    cp = np.bincount(fresh[0], minlength=m)
    cq = np.bincount(fresh[1], minlength=m)
    p2, q2 = cp / big_n, cq / big_n
    e = np.exp(eps)[:, None]
    # step 1: the event and direction per ε
    fwd = p1[None, :] > e * q1[None, :]
    bwd = q1[None, :] > e * p1[None, :]
    h_fwd = np.where(fwd, p1 - e * q1, 0.0).sum(axis=1)
    h_bwd = np.where(bwd, q1 - e * p1, 0.0).sum(axis=1)
    direction = np.where(h_fwd >= h_bwd, 1, -1).astype(np.int64)
    event = np.where(direction[:, None] == 1, fwd, bwd)
    k_x = (event * cp[None, :]).sum(axis=1).astype(np.int64)
    k_y = (event * cq[None, :]).sum(axis=1).astype(np.int64)
    k_num = np.where(direction == 1, k_x, k_y)  # the law whose mass is counted positively
    k_den = np.where(direction == 1, k_y, k_x)
    from scipy import stats  # lazy: ≈ 0.5 s to import, unused by a run's own process

    p_low = np.where(k_num > 0, stats.beta.ppf(a / 2, k_num, big_n - k_num + 1), 0.0)
    q_high = np.where(k_den < big_n, stats.beta.ppf(1 - a / 2, k_den + 1, big_n - k_den), 1.0)
    lb = np.maximum(p_low - np.exp(eps) * q_high, 0.0)
    plug = np.maximum(
        np.maximum(p2[None, :] - e * q2[None, :], 0.0).sum(axis=1),
        np.maximum(q2[None, :] - e * p2[None, :], 0.0).sum(axis=1),
    )
    return HockeyStick(
        epsilon=eps,
        delta_hat=np.asarray(plug, dtype=np.float64),
        delta_lb=np.asarray(lb, dtype=np.float64),
        direction=direction,
        k_x=k_x,
        k_x_prime=k_y,
        event_cells=event.sum(axis=1).astype(np.int64),
        alpha=a,
        n=n,
        n_confidence=big_n,
        cell_width=width,
    )
