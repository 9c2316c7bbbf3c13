"""A table sampler of the discrete Gaussian N_Z(0, σ²) for many draws at a few fixed σ².

:class:`DiscreteGaussianTable` draws ``X = ±|X|`` by inverse CDF, one 64-bit word of the generator
per draw: bit 63 is the sign, bits 0–62 a uniform ``V`` on ``[0, 2⁶³)``, and ``|X| = #{a ≥ 1 :
V < T_a}`` for integer thresholds ``T_a = round(2⁶³ · P(|X| ≥ a))``, a = 1..A (A: the last with
``T_a ≥ 1``). The sampler's law is therefore exactly known: ``P(|X| ≥ a) = T_a / 2⁶³``.

The lookup is a guide table indexed by the top ``k`` bits of the word (the sign and the top ``k − 1``
bits of ``V``): every bucket whose ``V``-range meets no threshold holds its signed value, so almost
every draw is one shift and one gather; the few buckets a threshold cuts (at most A of
``2^(k−1)``) are marked and their draws resolved by a binary search on the thresholds. The result
is the same function of the word either way, so draws do not depend on the chunking: a generator's
draws for consecutive chunks are its draws for the whole array.

Numerics (:mod:`decimal`, 50 significant digits): the weights ``w_k = exp(−k²/(2σ²))`` for the
float σ² exactly as given, by the recurrence ``w_k = w_{k−1}·e^{−1/(2σ²)}·q^{k−1}``,
``q = e^{−1/σ²}``; the sums are cut at N where the rigorous geometric bound
``Σ_{k>N} w_k ≤ w_{N+1} / (1 − e^{−x}) ≤ w_{N+1}·(1 + x)/x``, ``x = (N+1)/σ²`` (from
``k² ≥ (N+1)² + 2(N+1)(k−N−1)``) is
below 1e-45 of ``w_0``. Every tail ``P(|X| ≥ a)`` is thus known to a relative 1e-40, far below the
``2⁻⁶⁴`` of the threshold rounding. Stated, as rigorous upper bounds:

* :attr:`DiscreteGaussianTable.truncated_mass` — ``P(|X| > A)``, the mass the sampler never
  draws (below ``2⁻⁶⁴ ≈ 5.4e-20`` by construction);
* :attr:`DiscreteGaussianTable.tv_bound` — the total-variation distance between the sampler's law
  and the exact N_Z(0, σ²): computed term by term (``½ Σ_k |p̂_k − p_k|``) plus the error of the
  computation; about ``A · 2⁻⁶⁵``, i.e. 1e-18–1e-16 for σ² ≤ 1e4, and always below 1e-15 for
  σ² ≤ :data:`MAX_TABLE_SIGMA2` (1e7).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from typing import Literal

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError
from auditlib.mechanisms.base import Size, check_rng, positive_finite
from auditlib.mechanisms.discrete_gaussian import DiscreteGaussian

#: Largest σ² the table sampler accepts (its build walks about 14·σ terms in 50-digit decimals,
#: ≈ 0.4 s at the cap, where the TV bound is ≈ 5e-16).
MAX_TABLE_SIGMA2 = 1e7
#: Bits of the random word the guide table is indexed by (the sign and the top bits of V): 16, more
#: for more than 1,000 levels (at most 20), so that at most ~1.5 % of the draws need a search.
GUIDE_BITS = 16
MAX_GUIDE_BITS = 20
_PREC = 50
_CUT = Decimal("1e-45")  # relative weight of the terms beyond the cut, at most
_SENTINEL = np.iinfo(np.int64).min
_LOW63 = np.uint64(2**63 - 1)


def _weights(s2: Decimal) -> tuple[list[Decimal], Decimal]:
    """``w_0..w_N`` and a rigorous upper bound on ``Σ_{k>N} w_k`` (≤ 1e-45), 50 digits."""
    half = (-1 / (2 * s2)).exp()
    q = (-1 / s2).exp()
    w, ratio = [Decimal(1)], half  # ratio = w_k / w_{k−1} for the next k
    while True:
        n = len(w)  # candidate w_n
        w.append(w[-1] * ratio)
        ratio *= q
        nxt = w[-1] * ratio  # w_{n+1}
        x = (n + 1) / s2
        bound = nxt * (1 + x) / x  # ≥ w_{n+1} / (1 − e^{−x}), as 1 − e^{−x} ≥ x / (1 + x)
        if bound < _CUT:
            return w, bound


def _decimal_sigma2(sigma2: float) -> Decimal:
    return Decimal(sigma2)  # the float exactly


@dataclass(frozen=True)
class DiscreteGaussianTable:
    """Table sampler of N_Z(0, σ²) (see the module): exact thresholds, stated truncation.

    ``sigma2`` finite, 0 < σ² ≤ 1e7. The scipy-like distribution functions (pmf, cdf, …) are those
    of :class:`~auditlib.mechanisms.DiscreteGaussian`, the reference; this class only draws.

    >>> dg = DiscreteGaussianTable(10.0)
    >>> dg.levels, dg.truncated_mass < 2.0**-64, dg.tv_bound < 1e-15
    (29, True, True)
    """

    sigma2: float
    _thresholds: npt.NDArray[np.uint64] = field(init=False, repr=False, compare=False)
    _guide: npt.NDArray[np.int64] = field(init=False, repr=False, compare=False)
    _bits: int = field(init=False, repr=False, compare=False)
    _trunc: float = field(init=False, repr=False, compare=False)
    _tv: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        s2f = positive_finite("sigma2", self.sigma2)
        if s2f > MAX_TABLE_SIGMA2:
            raise InvalidParameterError(
                f"Invalid sigma2 for the table sampler: {self.sigma2!r}; at most "
                f"{MAX_TABLE_SIGMA2:g} (its tables grow like σ); use the reference sampler "
                "(DiscreteGaussian, sampler='reference') beyond that."
            )
        object.__setattr__(self, "sigma2", s2f)
        with localcontext() as ctx:
            ctx.prec = _PREC
            thresholds, trunc, tv = self._exact_tables(_decimal_sigma2(s2f))
        object.__setattr__(self, "_thresholds", thresholds)
        object.__setattr__(self, "_trunc", trunc)
        object.__setattr__(self, "_tv", tv)
        bits = min(MAX_GUIDE_BITS, max(GUIDE_BITS, thresholds.size.bit_length() + 6))
        object.__setattr__(self, "_bits", bits)
        object.__setattr__(self, "_guide", self._build_guide(bits))

    @staticmethod
    def _exact_tables(s2: Decimal) -> tuple[npt.NDArray[np.uint64], float, float]:
        """Ascending thresholds, and upper bounds on the truncated mass and the TV distance."""
        w, beyond = _weights(s2)
        n = len(w) - 1
        # upper[a] = Σ_{k ≥ a} w_k for a = 0..N (without the part beyond N)
        upper = [Decimal(0)] * (n + 2)
        acc = Decimal(0)
        for a in range(n, -1, -1):
            acc += w[a]
            upper[a] = acc
        z = w[0] + 2 * upper[1]  # errs low by 2·beyond ≤ 2e-45 (relative, w_0 = 1 ≤ Z)
        scale = Decimal(2**64) / z  # P(|X| ≥ a)·2⁶³ = 2·upper[a]·2⁶³ / Z
        thresholds: list[int] = []
        for a in range(1, n + 1):
            t = int((upper[a] * scale).to_integral_value())  # round half even
            if t < 1:
                break
            thresholds.append(t)
        last = len(thresholds)  # A
        # the exact law's P(|X| = m) and the sampler's, m = 0..N; TV = ½ Σ |difference|
        two63 = Decimal(2**63)
        surv = [two63] + [Decimal(t) for t in thresholds] + [Decimal(0)] * (n + 1 - last)
        tv = Decimal(0)
        for m in range(n + 1):
            exact = (w[m] if m == 0 else 2 * w[m]) / z
            tv += abs((surv[m] - surv[m + 1]) / two63 - exact)
        tv = tv / 2 + 2 * beyond  # the exact law's mass beyond N (≤ 2·beyond / Z, Z ≥ 1)
        # error of the decimal computation: w_k carries ≤ (k + 1)² roundings of 10^(1−prec)
        # relative (its recurrence), each sum ≤ N more; over probabilities of total ≤ 2, and Z's
        # relative error ≤ 2·beyond
        slack = Decimal(4 * ((n + 2) ** 2 + 2 * n + 8)) * Decimal(10) ** (1 - _PREC) + 4 * beyond
        trunc = 2 * upper[last + 1] / z + 2 * beyond if last + 1 <= n else 2 * beyond
        return (
            np.array(thresholds[::-1], dtype=np.uint64),
            _ceil_float(trunc + slack),
            _ceil_float(tv + slack),
        )

    def _build_guide(self, bits: int) -> npt.NDArray[np.int64]:
        """Signed value of every bucket of the top ``bits`` bits of the word, or the sentinel."""
        shift = 64 - bits
        b = np.arange(1 << (bits - 1), dtype=np.uint64)
        first = b << np.uint64(shift)
        last = first + np.uint64((1 << shift) - 1)
        lo, hi = self._magnitude(first), self._magnitude(last)
        mag = np.where(lo == hi, lo, -1)
        pos = np.where(mag < 0, _SENTINEL, mag)
        neg = np.where(mag < 0, _SENTINEL, -mag)
        return np.concatenate([pos, neg]).astype(np.int64)

    def _magnitude(self, v: npt.NDArray[np.uint64]) -> npt.NDArray[np.int64]:
        """``#{a : v < T_a}`` for 63-bit uniforms ``v``."""
        t = self._thresholds
        return (len(t) - np.searchsorted(t, v, side="right")).astype(np.int64)

    @property
    def levels(self) -> int:
        """A: the largest |X| the sampler draws."""
        return int(self._thresholds.size)

    @property
    def truncated_mass(self) -> float:
        """Rigorous upper bound on P(|X| > A) under the exact law (the mass never drawn)."""
        return self._trunc

    @property
    def tv_bound(self) -> float:
        """Rigorous upper bound on the TV distance between :meth:`rvs` and N_Z(0, σ²)."""
        return self._tv

    def survival_thresholds(self) -> npt.NDArray[np.uint64]:
        """``T_1..T_A`` (descending): the sampler draws ``|X| ≥ a`` with probability T_a / 2⁶³."""
        return self._thresholds[::-1].copy()

    def rvs(self, size: Size, rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Draw ``size`` samples (int64), one 64-bit word of ``rng`` each, in C order."""
        check_rng(rng)
        words = np.asarray(rng.bit_generator.random_raw(size=size), dtype=np.uint64)
        raw = words.reshape(-1)
        # the shifted word is < 2⁶³: viewed as int64 it indexes without a cast
        out = self._guide.take((raw >> np.uint64(64 - self._bits)).view(np.int64))
        cut = np.flatnonzero(out == _SENTINEL)
        if cut.size:
            r = raw[cut]
            mag = self._magnitude(r & _LOW63)
            out[cut] = np.where(r >> np.uint64(63) != 0, -mag, mag)
        return out.reshape(words.shape)


#: the discrete-Gaussian samplers: ``"table"`` (:class:`DiscreteGaussianTable`, the default) and
#: ``"reference"`` (:class:`~auditlib.mechanisms.DiscreteGaussian`'s 53-bit inverse CDF)
DG_SAMPLERS: tuple[str, ...] = ("table", "reference")
DGSampler = Literal["table", "reference"]


def discrete_gaussian_sampler(
    sigma2: float, sampler: str = "table"
) -> DiscreteGaussianTable | DiscreteGaussian:
    """A sampler of N_Z(0, σ²) by name (:data:`DG_SAMPLERS`); both draw with ``.rvs(size, rng)``,
    one 64-bit word of ``rng`` per draw. Samplers are immutable and kept (the last 64 per process):
    a process releasing state after state builds each σ²'s tables once."""
    if sampler not in DG_SAMPLERS:
        raise InvalidParameterError(
            f"Invalid discrete-Gaussian sampler: {sampler!r}; allowed: {', '.join(DG_SAMPLERS)}"
        )
    return _cached_sampler(float(sigma2), sampler)


@functools.lru_cache(maxsize=64)
def _cached_sampler(sigma2: float, sampler: str) -> DiscreteGaussianTable | DiscreteGaussian:
    return DiscreteGaussianTable(sigma2) if sampler == "table" else DiscreteGaussian(sigma2)


def _ceil_float(x: Decimal) -> float:
    """The smallest float ≥ x (x ≥ 0)."""
    f = float(x)
    return f if Decimal(f) >= x else math.nextafter(f, math.inf)
