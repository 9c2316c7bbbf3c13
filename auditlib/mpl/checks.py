"""Checks shared by the MPL bound (:mod:`~auditlib.mpl.mpl`) and the hockey-stick δ(ε)
(:mod:`~auditlib.mpl.hockey`): a confidence level α and a grid of ε values.

Both estimators validate their arguments here so that neither imports the other's checks; the
layering is protocol/density/checks -> hockey -> mpl.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

FloatArray = npt.NDArray[np.float64]


def check_alpha(alpha: object) -> float:
    """Return α as a float in (0, 1), or raise naming it."""
    try:
        a = float(alpha)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InvalidParameterError(f"Invalid alpha: {alpha!r} is not a number.") from None
    if not (0.0 < a < 1.0):
        raise InvalidParameterError(f"Invalid alpha: {alpha!r}; a level must lie in (0, 1).")
    return a


def check_epsilons(epsilons: Sequence[float] | npt.ArrayLike) -> FloatArray:
    """ε grid as a 1-D float array of finite values ≥ 0, or raise naming the bad value."""
    arr = np.atleast_1d(np.asarray(epsilons, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidParameterError(f"Invalid epsilons: {epsilons!r}; need a non-empty 1-D list.")
    bad = arr[~(np.isfinite(arr) & (arr >= 0))]
    if bad.size:
        raise InvalidParameterError(
            f"Invalid epsilon: {float(bad[0])!r}; epsilons are finite and >= 0."
        )
    return arr
