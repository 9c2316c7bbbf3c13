"""How a verdict's sentences write numbers: counts in groups of three digits, values to a few
significant digits, infinities as signs."""

from __future__ import annotations

import math


def format_count(n: int) -> str:
    """``n`` with a thin gap between groups of three digits: 17 480 → ``"17 480"``."""
    return f"{n:,}".replace(",", " ")


def format_number(x: float, digits: int = 4) -> str:
    """``x`` to ``digits`` significant digits; ±∞ as ``"∞"`` / ``"−∞"``."""
    if not math.isfinite(x):
        return "∞" if x > 0 else "−∞"
    return f"{x:.{digits}g}"
