"""A published release declared *post-processed* (e.g. TopDown of the declared allocation, as the
Census Bureau's counts are): its residuals are not the declared noise, so they are tested against
a reference — dpaudit's own simulation of the declared release on the same true counts — never
against the raw noise law.

Under the claim, each published run and each reference run is an independent draw of the same
release of the same truth, so any statistic computed run by run is exchangeable between the two
samples, and a two-sample rank test of it is valid whatever the post-processing does to the
noise (its bias, its dependence between cells). The statistic is a run's mean absolute residual
over the cells of one size class of true counts (:data:`SIZE_EDGES`): per level and size class,
one one-sided Mann–Whitney test (the published runs' errors smaller than the reference's: less
noise than declared). A conservative release (more noise than declared) is not refuted.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> truth = np.repeat([0, 5, 50], 100)
>>> ref = np.maximum(truth + rng.normal(0, 2.0, (60, 300)), 0) - truth        # declared noise
>>> pub = np.maximum(truth + rng.normal(0, 1.0, (20, 300)), 0) - truth        # half of it
>>> cs = compare_sizes(pub, truth, ref, truth, threshold=0.01)
>>> [c.sizes for c in cs], all(c.p_value < 1e-6 for c in cs)
(['0', '1–9', '10–99'], True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from auditlib.claims.numbers import format_count, format_number
from auditlib.claims.verdict import Verdict
from auditlib.exceptions import InvalidParameterError

#: size classes of true counts: 0, 1–9, 10–99, 100–999, 1000 and more
SIZE_EDGES: tuple[int, ...] = (0, 1, 10, 100, 1000)
#: a level is decided only if one of its size classes would detect, with 80 % power, published
#: errors this fraction of the reference's (the spread a noise scale 1/RESOLVE_SPREAD smaller
#: leaves, e.g. ε about 1.25 × the declared one)
RESOLVE_SPREAD = 0.8
POWER = 0.8

RULE = (
    "A published release declared post-processed is tested at each declared geolevel mapped "
    "onto a level of the table against dpaudit's own simulation of the declared release on the "
    "same true counts (its reference runs): per level and size class of true counts (0, 1–9, "
    "10–99, 100–999, ≥ 1000), a one-sided Mann–Whitney test of the runs' mean absolute "
    "residuals, each at level α/m (m: the tests over all levels and size classes; Bonferroni, so "
    "a true claim is refuted at any level with probability at most α). Refuted: the published "
    "runs' errors are smaller than the declared release's in some size class (less noise than "
    "declared). Undecided: no size class of the level would detect errors "
    f"{RESOLVE_SPREAD:g} × the declared release's with {POWER:.0%} power (too few published "
    "runs), or the level is measured at none of the table's levels. Consistent: otherwise; a "
    "release with more noise than declared is consistent. Assumed: the published runs are "
    "independent releases of the same true counts, post-processed as dpaudit's TopDown does."
)

ASSUMPTIONS = (
    "the published runs are independent releases of the same true counts, each post-processed "
    "as dpaudit's TopDown does (non-negative least squares, then controlled rounding); a "
    "post-processor with less error than dpaudit's could read as less noise"
)


def size_labels() -> list[str]:
    """The size classes' labels: "0", "1–9", "10–99", "100–999", "≥ 1000"."""
    out = []
    for lo, hi in zip(SIZE_EDGES, (*SIZE_EDGES[1:], None), strict=True):
        out.append(f"≥ {lo}" if hi is None else (str(lo) if hi == lo + 1 else f"{lo}–{hi - 1}"))
    return out


def size_class(truth: npt.ArrayLike) -> npt.NDArray[np.intp]:
    """Each true count's size class (an index into :func:`size_labels`)."""
    t = np.asarray(truth)
    if np.any(t < 0):
        raise InvalidParameterError("Invalid truth: negative true counts; counts are >= 0")
    return np.searchsorted(np.asarray(SIZE_EDGES), t, side="right") - 1


@dataclass(frozen=True)
class SizeComparison:
    """One size class at one level: the published and reference runs' mean absolute residuals
    (medians over runs) and mean residuals (bias), the one-sided Mann–Whitney p-value, and the
    ratio of spreads the test detects with :data:`POWER` at its threshold (0: none)."""

    sizes: str
    cells: int
    runs: int
    reference_runs: int
    spread: float
    reference_spread: float
    bias: float
    reference_bias: float
    p_value: float
    detectable: float

    @property
    def spread_ratio(self) -> float:
        return self.spread / self.reference_spread if self.reference_spread > 0 else math.nan


def run_statistics(
    residual: npt.ArrayLike, truth: npt.ArrayLike
) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per size class present: each run's mean absolute residual and mean residual over its
    cells (``residual``: (runs, cells), ``truth``: (cells,))."""
    r = np.asarray(residual, dtype=np.float64)
    t = np.asarray(truth)
    if r.ndim != 2 or r.shape[1] != t.size:
        raise InvalidParameterError(
            f"Invalid residuals: shape {r.shape} for {t.size} true counts; pass (runs, cells)"
        )
    if not np.all(np.isfinite(r)):
        raise InvalidParameterError("Invalid residuals: NaN or infinite values; drop them first")
    cls = size_class(t)
    return {
        int(k): (np.abs(r[:, cls == k]).mean(axis=1), r[:, cls == k].mean(axis=1))
        for k in np.unique(cls)
    }


def _smallest_p(runs: int, reference_runs: int) -> float:
    """The one-sided Mann–Whitney test's least p-value (every published run below every
    reference run): 1 / C(runs + reference_runs, runs)."""
    return math.exp(
        math.lgamma(runs + 1)
        + math.lgamma(reference_runs + 1)
        - math.lgamma(runs + reference_runs + 1)
    )


#: trials of the rank test simulated per candidate ratio in :func:`detectable_ratio` (fewer, down
#: to 200, where runs are so many that the draws would pass 160 MB)
POWER_TRIALS = 2000


def detectable_ratio(ref_spread: np.ndarray, runs: int, threshold: float) -> float:
    """The published-to-reference spread ratio k the one-sided test detects with :data:`POWER`
    at ``threshold``: run statistics normal with the reference runs' mean and spread, the
    published ones scaled by k, the rank test simulated (:data:`POWER_TRIALS` trials per k, a
    fixed stream, so the number is reproducible) and k found by bisection to 0.005; 0 when the
    test cannot reach ``threshold`` at all."""
    s = ref_spread.size
    if s < 2 or _smallest_p(runs, s) > threshold:
        return 0.0
    mean, sd = float(ref_spread.mean()), float(ref_spread.std(ddof=1))
    if mean <= 0:
        return 0.0
    if sd == 0:
        return 1.0
    trials = max(200, min(POWER_TRIALS, 20_000_000 // (runs + s)))  # at most 160 MB of draws
    z = np.random.default_rng(0).standard_normal((trials, runs + s))

    from scipy import stats  # lazy: ≈ 0.5 s to import, unused by a run's own process

    def power(k: float) -> float:
        pub, ref = k * (mean + sd * z[:, :runs]), mean + sd * z[:, runs:]
        p = stats.mannwhitneyu(pub, ref, alternative="less", axis=1).pvalue
        return float(np.mean(p < threshold))

    lo, hi = 0.0, 1.0  # power(lo) >= POWER > power(hi), unless even k = 0 falls short
    if power(lo) < POWER:
        return 0.0
    while hi - lo > 0.005:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if power(mid) >= POWER else (lo, mid)
    return lo


def compare_sizes(
    published: npt.ArrayLike,
    truth: npt.ArrayLike,
    reference: npt.ArrayLike,
    reference_truth: npt.ArrayLike,
    *,
    threshold: float,
    power: bool = True,
) -> list[SizeComparison]:
    """Per size class of true counts: the published runs' residuals (``published``: (runs,
    cells)) against the reference runs' (``reference``: (reference runs, cells) on
    ``reference_truth``, the same true counts in any order), a one-sided Mann–Whitney test of the
    runs' mean absolute residuals (published smaller); ``power``: also each class's
    :func:`detectable_ratio` (else NaN)."""
    if not 0.0 < threshold < 0.5:
        raise InvalidParameterError(f"Invalid threshold: {threshold!r}; pass α/m in (0, 0.5)")
    t, rt = np.asarray(truth), np.asarray(reference_truth)
    if not np.array_equal(np.sort(t.ravel()), np.sort(rt.ravel())):
        raise InvalidParameterError(
            "Invalid reference: its true counts are not the published release's; simulate the "
            "declared release on the same table"
        )
    from scipy import stats  # lazy: ≈ 0.5 s to import, unused by a run's own process

    pub, ref = run_statistics(published, t), run_statistics(reference, rt)
    labels = size_labels()
    out = []
    for k, (spread, bias) in pub.items():
        rs, rb = ref[k]
        p = float(stats.mannwhitneyu(spread, rs, alternative="less").pvalue)
        out.append(
            SizeComparison(
                sizes=labels[k],
                cells=int(np.count_nonzero(size_class(t) == k)),
                runs=int(spread.size),
                reference_runs=int(rs.size),
                spread=float(np.median(spread)),
                reference_spread=float(np.median(rs)),
                bias=float(np.median(bias)),
                reference_bias=float(np.median(rb)),
                p_value=p,
                detectable=(
                    detectable_ratio(rs, int(spread.size), threshold) if power else math.nan
                ),
            )
        )
    return out


def judge_post_processed(
    geolevel: str,
    comparisons: Sequence[SizeComparison],
    *,
    threshold: float,
    declared_eps: float,
    delta: float,
    measured_at: str,
    post_processing: str = "topdown",
) -> Verdict:
    """A post-processed published level's verdict from its size classes' tests (each at
    ``threshold`` = α/m): refuted when one class's published errors are significantly smaller
    than the declared release's; undecided when no class could detect errors
    :data:`RESOLVE_SPREAD` × the reference's; consistent otherwise."""
    if not comparisons:
        raise InvalidParameterError(f"Invalid comparisons: none for {geolevel!r}")
    runs, ref_runs = comparisons[0].runs, comparisons[0].reference_runs
    best = min(comparisons, key=lambda c: c.p_value)
    what = "dpaudit's TopDown" if post_processing == "topdown" else post_processing
    ev: dict[str, Any] = {
        "test": "two_sample",
        "post_processing": post_processing,
        "measured_at": measured_at,
        "n": sum(c.cells for c in comparisons) * runs,
        "runs": runs,
        "reference_runs": ref_runs,
        "threshold": threshold,
        "declared_eps": declared_eps,
        "delta": delta,
        "p_value": best.p_value,
        "statistic": best.spread_ratio,
        "sizes": [asdict(c) for c in comparisons],
        "assumptions": ASSUMPTIONS,
    }
    where = (
        f"{format_count(runs)} published runs at {measured_at} against {format_count(ref_runs)} runs of "
        f"{what} of the declared allocation (ε = {format_number(declared_eps)} at δ = {delta:g}) on the "
        "same true counts"
    )
    if best.p_value < threshold:
        return Verdict(
            geolevel,
            "refuted",
            f"refuted: less noise than declared — {where}: where the true counts are "
            f"{best.sizes} ({format_count(best.cells)} cells) the published counts are off by "
            f"{format_number(best.spread, 3)} on average against the declared release's "
            f"{format_number(best.reference_spread, 3)} (Mann–Whitney p = {format_number(best.p_value, 2)} < "
            f"{format_number(threshold, 2)})",
            ev,
        )
    resolving = max(comparisons, key=lambda c: c.detectable if c.detectable > 0 else 0.0)
    if resolving.detectable < RESOLVE_SPREAD:
        return Verdict(
            geolevel,
            "undecided",
            f"undecided: {where} show no smaller errors, but could not tell errors "
            f"{RESOLVE_SPREAD:g} × the declared release's from them (at best "
            f"{format_number(resolving.detectable, 2)} ×, true counts {resolving.sizes}); more published "
            "runs would decide",
            ev,
        )
    ratios = ", ".join(f"{c.sizes}: {format_number(c.spread_ratio, 3)}" for c in comparisons)
    return Verdict(
        geolevel,
        "consistent",
        f"consistent: {where} show no smaller errors (published / declared mean absolute "
        f"error by true count {ratios}; least p = {format_number(best.p_value, 2)}); errors "
        f"{format_number(resolving.detectable, 2)} × the declared release's would be seen with "
        f"{POWER:.0%} power",
        ev,
    )
