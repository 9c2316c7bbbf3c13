"""Maximum privacy loss (MPL): statistical lower bounds on ε from samples alone (Askin, Kutta & Dette).

Askin, Kutta & Dette, "Statistical Quantification of Differential Privacy: A Local Approach"
(IEEE S&P 2022). By Theorem 1 the privacy loss of a pair (x, x′) is the supremum of the *local*
loss ℓ_{x,x′}(t) = |ln f_x(t) − ln f_x′(t)| over outputs t, so no event has to be selected:

* :mod:`~auditlib.mpl.protocol` — :class:`MechanismUnderTest`, a checked batched sampler.
* :mod:`~auditlib.mpl.density` — TDDE and TKDE, the truncated density estimators, and bandwidths.
* :mod:`~auditlib.mpl.dpl` — Algorithm 3: ε̂_{x,x′} = max_{t∈C} ℓ̂(t), its location t̂ and the curve.
* :mod:`~auditlib.mpl.mpl` — Algorithm 4: LB with P(LB ≤ ε*_C) → 1 − α (one-sided, asymptotic).
* :mod:`~auditlib.mpl.hockey` — the hockey-stick δ(ε) of a pair from the same draws, with a
  finite-sample lower bound (for (ε, δ) users).
* :mod:`~auditlib.mpl.catalogue` — mechanisms with known ε (Laplace, Report Noisy Max, exponential,
  continuous Noisy Max, noisy counts) to validate all of the above; SVT2/4/5/6 in
  :mod:`~auditlib.mpl.svt`, randomized response in :mod:`~auditlib.mpl.randomized_response`.
* :mod:`~auditlib.mpl.census` — census releases under test: a released count of a database D vs
  D′ (one person added, removed, moved), DG with σ² of an allocation or GDPC, exact ε*_C;
  :mod:`~auditlib.mpl.census_hist` — the TopDown, ADPC and RDPC counts of a histogram database
  (TopDown and RDPC bounded, not exact).

See ``docs/mpl.md`` for the derivation, the assumptions and which way each step errs.
"""

from auditlib.mpl.catalogue import (
    KnownMechanism,
    continuous_noisy_max,
    discrete_gaussian_count,
    exponential_epsilon,
    exponential_mechanism,
    geometric_count,
    laplace_mechanism,
    noisy_max_pmf,
    report_noisy_max,
)
from auditlib.mpl.census import (
    allocation_count,
    allocation_query_count,
    census_database,
    gdpc_count,
    neighbour_pairs,
)
from auditlib.mpl.census_hist import (
    AccountedMechanism,
    adpc_count,
    histogram_database,
    rdpc_count,
    topdown_count,
)
from auditlib.mpl.density import (
    silverman_bandwidth,
    tdde,
    tkde,
    undersmoothed_bandwidth,
)
from auditlib.mpl.dpl import DEFAULT_TAU, DPLResult, Region, dpl, dpl_from_samples
from auditlib.mpl.hockey import HockeyStick, hockey_stick, hockey_stick_exact
from auditlib.mpl.mpl import ConfidenceStep, MPLResult, confidence_bound, mpl
from auditlib.mpl.protocol import MechanismUnderTest, OutputKind, Sampler, check_samples
from auditlib.mpl.randomized_response import randomized_response
from auditlib.mpl.svt import svt2, svt4, svt5, svt6

__all__ = [
    "DEFAULT_TAU",
    "AccountedMechanism",
    "ConfidenceStep",
    "DPLResult",
    "HockeyStick",
    "KnownMechanism",
    "MPLResult",
    "MechanismUnderTest",
    "OutputKind",
    "Region",
    "Sampler",
    "adpc_count",
    "allocation_count",
    "allocation_query_count",
    "census_database",
    "check_samples",
    "confidence_bound",
    "continuous_noisy_max",
    "discrete_gaussian_count",
    "dpl",
    "dpl_from_samples",
    "exponential_epsilon",
    "exponential_mechanism",
    "gdpc_count",
    "geometric_count",
    "histogram_database",
    "hockey_stick",
    "hockey_stick_exact",
    "laplace_mechanism",
    "mpl",
    "neighbour_pairs",
    "noisy_max_pmf",
    "randomized_response",
    "rdpc_count",
    "report_noisy_max",
    "silverman_bandwidth",
    "svt2",
    "svt4",
    "svt5",
    "svt6",
    "tdde",
    "tkde",
    "topdown_count",
    "undersmoothed_bandwidth",
]
