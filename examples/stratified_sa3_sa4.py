"""Flaxman & Petti's SA3 and SA4 examples on a synthetic stand-in for Washington's 1940 enumeration districts.

    python examples/stratified_sa3_sa4.py

2,663 districts (as in the appendix) in 39 counties, about 650 people each, split over the 28 cells
of the PL94-like schema (voting age x Hispanic x 7 races) by auditlib.geography.populations. Prints
the EPL of the released strata and totals (SA3: total at 0.25, strata at 0.75; SA4: strata at 0.25
with county totals invariant), and for SA4 separates what non-negativity and the invariant each do.
"""

from __future__ import annotations

import numpy as np

from auditlib import seeds
from auditlib.epl import epl
from auditlib.geography.populations import HistogramModel, block_histograms
from auditlib.geography.schema import schema
from auditlib.simulate.stratified import invariant_release, stratified_release

#: keyed streams of this example: (EXAMPLE_STREAM, part)
EXAMPLE_STREAM = 41


def main(seed: int = 1940) -> None:
    rng = seeds.rng(seed, EXAMPLE_STREAM, 0)
    n, n_counties = 2663, 39
    pops = rng.negative_binomial(2, 2 / (2 + 650), size=n)
    county = np.sort(rng.integers(0, n_counties, size=n))
    truth = block_histograms(
        pops, schema("pl94"), rng, groups=county, model=HistogramModel(block_concentration=5.0)
    )
    print(f"{n} districts, {pops.sum():,} people, {np.mean(truth == 0):.0%} of cells empty")

    sa3 = stratified_release(truth, 0.25, 0.75, seeds.rng(seed, EXAMPLE_STREAM, 1))
    big = truth >= 20
    print(
        "SA3 (eps 0.25 + 0.75): EPL strata "
        f"{epl(sa3.strata_residuals().ravel()).epl:.2f} (cells >= 20: "
        f"{epl(sa3.strata_residuals()[big]).epl:.2f}), totals {epl(sa3.total_residuals()).epl:.2f} "
        f"(mean residual {sa3.total_residuals().mean():+.1f}: clipping biases the totals up, and the "
        "symmetric window then reaches an empty tail)"
    )
    sa4 = invariant_release(truth, county, 0.25, seeds.rng(seed, EXAMPLE_STREAM, 2))
    res = sa4.strata_residuals()
    clipped = np.maximum(sa4.noisy_strata, 0) - truth  # non-negativity without the invariant
    noise = sa4.noisy_strata - truth
    print(
        f"SA4 (eps 0.25, county totals invariant): EPL strata {epl(res.ravel()).epl:.2f}; "
        f"clipping alone {epl(clipped.ravel()).epl:.2f}"
    )
    print(
        f"  cells >= 20: EPL {epl(res[big]).epl:.2f} (noise alone {epl(noise[big]).epl:.2f}), "
        f"mean residual {res[big].mean():+.2f}"
    )


if __name__ == "__main__":
    main()
