"""The 2022-08-25 DHC allocation as modelled by Su, Su & Wang (Su, Su & Wang, Table 1 and Sec. 3.3).

Setting: rho = 3.65, level shares a = (20, 274, 85, 131, 131, 238, 118, 3)/1000, ten i.i.d. count
queries per level with sigma_i^2 = 10 / (2 a_i rho) as exact rationals, add/remove neighbours.
Expected values: the project's REFERENCE.md ("Accounting (Su, Su & Wang)"), which reproduces Su, Su & Wang's
Table 1 to the printed digits. Tolerances: the exact eps are printed to 6 decimals, so the bracket
must lie within 5e-7 (rounding) + 1e-7 of them; Bureau eps to the 3 printed decimals; the composed
eps(1e-10) is printed to 10 decimals with a certified bracket 6e-11 wide, so we ask for +-1e-9 and a
bracket narrower than 1e-8.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from auditlib.accounting import DiscreteGaussianComposition, bureau_epsilon, cks_epsilon
from auditlib.exceptions import AccountingError

RHO = Fraction(73, 20)
SHARES = {
    "US": Fraction(20, 1000),
    "State": Fraction(274, 1000),
    "County": Fraction(85, 1000),
    "PEPG": Fraction(131, 1000),
    "TSG": Fraction(131, 1000),
    "Tract subset": Fraction(238, 1000),
    "OBG": Fraction(118, 1000),
    "Block": Fraction(3, 1000),
}
DELTAS = [1e-5, 1e-10, 1e-11]
# level: (printed sigma^2, Bureau eps, exact eps) at DELTAS
TABLE = {
    "US": (68.49, (1.907, 2.666, 2.793), (1.478100, 2.330753, 2.468157)),
    "State": (5.00, (7.787, 10.598, 11.066), (6.571647, 9.600900, 10.125417)),
    "County": (16.12, (4.090, 5.656, 5.917), (3.328488, 5.049122, 5.327609)),
    "PEPG": (10.46, (5.171, 7.114, 7.438), (4.267265, 6.389608, 6.738268)),
    "TSG": (10.46, (5.171, 7.114, 7.438), (4.267265, 6.389608, 6.738268)),
    "Tract subset": (5.76, (7.194, 9.814, 10.250), (6.047106, 8.882436, 9.353573)),
    "OBG": (11.61, (4.884, 6.729, 7.036), (4.017307, 6.029688, 6.362426)),
    "Block": (456.62, (0.721, 1.015, 1.064), (0.522190, 0.863346, 0.917830)),
}


def sigma2(level: str) -> Fraction:
    return Fraction(10) / (2 * SHARES[level] * RHO)


@pytest.mark.parametrize("level", list(TABLE))
def test_level_exact_epsilon(level: str) -> None:
    printed_sigma2, _, exact = TABLE[level]
    assert round(float(sigma2(level)), 2) == printed_sigma2
    acc = DiscreteGaussianComposition([(sigma2(level), 10)])
    assert acc.method == "exact-lattice"
    b = acc.epsilon(DELTAS)
    np.testing.assert_allclose(b.lower, exact, rtol=0, atol=6e-7)
    np.testing.assert_allclose(b.upper, exact, rtol=0, atol=6e-7)
    assert np.all(b.upper - b.lower <= 1e-10)


@pytest.mark.parametrize("level", list(TABLE))
def test_level_bureau_epsilon(level: str) -> None:
    _, bureau, _ = TABLE[level]
    rho_level = float(10 / (2 * sigma2(level)))  # = a_i * rho
    assert np.round(bureau_epsilon(rho_level, DELTAS), 3).tolist() == list(bureau)


@pytest.fixture(scope="module")
def composed() -> DiscreteGaussianComposition:
    return DiscreteGaussianComposition([(sigma2(level), 10) for level in SHARES])


def test_composed_eight_levels(composed: DiscreteGaussianComposition) -> None:
    assert composed.method == "exact-lattice"
    assert composed.rho_exact == RHO
    # 1/sigma_i^2 = 0.73 a_i, so the lattice step is 0.00073 (REFERENCE.md)
    assert composed.grid == pytest.approx(0.00073, rel=1e-15)
    b = composed.epsilon(DELTAS)
    assert b.upper[1] - b.lower[1] < 1e-8
    assert abs(b.lower[1] - 20.3246897508) <= 1e-9
    assert abs(b.upper[1] - 20.3246897508) <= 1e-9
    np.testing.assert_allclose([b.lower[0], b.lower[2]], [14.576027, 21.267202], atol=6e-7)
    np.testing.assert_allclose([b.upper[0], b.upper[2]], [14.576027, 21.267202], atol=6e-7)


def test_composed_against_zcdp_conversions(composed: DiscreteGaussianComposition) -> None:
    """REFERENCE.md: Bureau 16.615 / 21.985 / 22.880; CKS 21.143 at 1e-10; exact is below both."""
    assert np.round(bureau_epsilon(composed.rho, DELTAS), 3).tolist() == [16.615, 21.985, 22.880]
    cks = cks_epsilon(composed.rho, 1e-10)
    assert round(cks, 3) == 21.143
    assert composed.epsilon(1e-10).upper < cks


def test_composed_small_delta(composed: DiscreteGaussianComposition) -> None:
    """Certified down to delta = 1e-20; refused where the 1e-30 truncations would decide.

    At 1e-20 the dropped mass (~1e-28) is ~1e-8 of delta, which widens eps by about
    1e-8 / |d ln delta / d eps| (~3 here): a few 1e-9.
    """
    deep = composed.epsilon(1e-20)
    assert deep.upper - deep.lower < 1e-8
    assert deep.lower > composed.epsilon(1e-11).upper
    with pytest.raises(AccountingError, match=r"delta=1e-27 is below what this accountant"):
        composed.epsilon(1e-27)


def test_composition_order_of_levels_is_irrelevant(composed: DiscreteGaussianComposition) -> None:
    reversed_levels = DiscreteGaussianComposition(
        [(sigma2(level), 10) for level in reversed(list(SHARES))]
    )
    assert reversed_levels.epsilon(1e-10) == composed.epsilon(1e-10)
