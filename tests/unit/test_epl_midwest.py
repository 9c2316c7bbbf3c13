"""Flaxman's releases of real counts: the 1990 Midwest county x race table (plotnine's
``midwest``, 437 counties, 2,185 cells), through ``examples/midwest.py``.

Expectations, none taken from the code under test:

* GDPC adds G(ε) to each cell: the two-sided geometric's log-ratio is exactly ±ε (Flaxman 2019 §2.2),
  so with 218,500 residuals (no small-sample bias left, docs/epl.md) EPL is within 5 % of ε.
* ADPC (P = 4) matches its *exact* loss over the 5–95 % window, from the geometric pmfs convolved
  (:func:`adpc_exact_loss`, ≈ 0.55 ε), within 6 % (the kernel flattens a curved log-ratio a
  little); Flaxman's "0.75–0.8 ε" is not the release's loss over this window.
* RDPC measures each of its J + 1 = 4 levels with G(ε/4) (Flaxman 2019 Fig. 1): the cells' EPL is
  about ε/4, while a person is counted at all four levels, so the composed EPL is about ε —
  basic composition, which the nearly uncorrelated levels attain — and its interval holds ε.
"""

from __future__ import annotations

import pytest
from test_epl_flaxman import adpc_exact_loss

from tests.integration._examples import load_example

EPS = 0.5


@pytest.fixture(scope="module")
def numbers() -> dict:
    return load_example("midwest.py", "midwest_example").flaxman_epl(EPS, replicates=100, seed=1990)


def test_the_table_is_the_1990_census(numbers: dict) -> None:
    pop = load_example("midwest.py", "midwest_example").midwest_population()
    assert pop.n_units("county") == 437 and numbers["cells"] == 2_185
    assert int(pop.histograms.sum()) == 42_008_942  # the five states' 1990 populations
    assert numbers["n"] == 100 * 2_185


def test_gdpc_reads_eps_and_adpc_its_exact_windowed_loss(numbers: dict) -> None:
    assert numbers["gdpc"] / EPS == pytest.approx(1.0, abs=0.05)
    exact = adpc_exact_loss(EPS, 4)
    assert exact / EPS == pytest.approx(0.553, abs=0.005)
    assert numbers["adpc"] == pytest.approx(exact, rel=0.06)
    assert not 0.75 <= numbers["adpc"] / EPS <= 0.8


def test_rdpc_a_quarter_per_level_but_eps_composed(numbers: dict) -> None:
    assert 0.2 <= numbers["rdpc"] / EPS <= 0.3
    lo, hi = numbers["rdpc_composed_ci"]
    assert lo <= EPS <= hi
    assert numbers["rdpc_composed"] > 3 * numbers["rdpc"]  # ε/4 per level is no slack
