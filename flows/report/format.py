"""Number formatting of the report: significant digits, scientific notation, integers, per cent,
ranges, durations, certified ε brackets (rounded outwards) and variance cuts.

Every formatter takes any value (a numpy scalar, ``None``, NaN) and returns a string; missing or
non-finite values print as "—" (∞ as "∞").
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any

import numpy as np


def is_finite(x: Any) -> bool:
    """Whether ``x`` converts to a finite float (``None`` and strings that are no number: no)."""
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def fmt_num(x: Any, sig: int = 4) -> str:
    """Format a number to ``sig`` significant digits; "—" for missing values."""
    if x is None or not is_finite(x):
        if x is not None and isinstance(x, float | np.floating) and math.isinf(float(x)):
            return "∞" if float(x) > 0 else "−∞"
        return "—"
    v = float(x)
    if v == 0:
        return "0"
    if 1e-4 <= abs(v) < 1e6:
        return f"{v:.{sig}g}"
    return fmt_sci(v, sig)


def fmt_sci(x: float, sig: int = 3) -> str:
    """Compact scientific notation: ``1e-10``, ``2.5e-5``, ``1.2e+6`` -> ``1.2e6``."""
    s = f"{float(x):.{sig}g}"
    if "e" not in s:
        s = f"{float(x):.{max(sig - 1, 0)}e}"
    mant, exp = s.split("e")
    if "." in mant:
        mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"


def fmt_delta(d: float) -> str:
    return fmt_sci(d, 3)


def fmt_int(x: Any) -> str:
    if x is None or not is_finite(x):
        return "—"
    return f"{int(x):,}".replace(",", "\u202f")


#: Decimals of a certified ε for a reader: a bracket narrower than this prints as one number.
READER_DECIMALS = 4


def _strip(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def fmt_bracket(lower: Any, upper: Any, *, max_decimals: int = READER_DECIMALS) -> str:
    """Format a certified bracket ``[lower, upper]`` of ε for a reader.

    A bracket is printed to one decimal past the first at which its ends differ (the first
    significant decimal of its width), both ends rounded *outwards* (lower down, upper up), so the
    printed bracket still contains the exact value. A bracket whose ends agree beyond ``max_decimals`` is noise to a reader: it prints as
    one number, the exact value to ``max_decimals`` decimals (both ends round to it, so the exact
    value does too: certified to the digits shown; more decimals only in the rare case that the
    ends round apart). JSON and the store keep both ends in full.
    """
    if not (is_finite(lower) and is_finite(upper)):
        if is_finite(upper):
            return f"≤ {fmt_num(upper, 6)}"
        if is_finite(lower):
            return f"≥ {fmt_num(lower, 6)}"
        return "—"
    lo, hi = sorted((Decimal(repr(float(lower))), Decimal(repr(float(upper)))))
    if lo == hi:
        return _strip(f"{lo:.{max_decimals}f}") + " (exact)"
    decimals = max(math.floor(-math.log10(float(hi - lo))) + 2, 0)
    for d in range(max_decimals, decimals):
        q = Decimal(1).scaleb(-d)
        a, b = lo.quantize(q, rounding=ROUND_HALF_EVEN), hi.quantize(q, rounding=ROUND_HALF_EVEN)
        if a == b:
            return f"{a:.{d}f}"
    q = Decimal(1).scaleb(-decimals)
    lo_d = lo.quantize(q, rounding=ROUND_FLOOR)
    hi_d = hi.quantize(q, rounding=ROUND_CEILING)
    return f"[{lo_d:.{decimals}f}, {hi_d:.{decimals}f}]"


def fmt_pct(x: Any) -> str:
    if x is None or not is_finite(x):
        return "—"
    return f"{100.0 * float(x):.1f} %"


def fmt_range(lo: Any, hi: Any, sig: int = 4) -> str:
    if not (is_finite(lo) and is_finite(hi)):
        return "—"
    a, b = fmt_num(lo, sig), fmt_num(hi, sig)
    return a if a == b else f"{a} – {b}"


def fmt_duration(seconds: Any) -> str:
    if seconds is None or not is_finite(seconds):
        return "—"
    s = float(seconds)
    if s < 60:
        return f"{s:.1f} s"
    m, sec = divmod(round(s), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min {sec:02d} s" if h else f"{m} min {sec:02d} s"


def fmt_cut(lower: Any, upper: Any) -> str:
    """A certified variance cut: its lower end (guaranteed), in per cent with two decimals."""
    if not is_finite(lower):
        return "—"
    lo = 100.0 * float(lower)
    if is_finite(upper) and abs(100.0 * float(upper) - lo) >= 0.005:
        return f"{lo:.2f}–{100.0 * float(upper):.2f} %"
    return f"{lo:.2f} %"
