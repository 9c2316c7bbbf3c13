"""Whether a store's release was simulated or published, and what that makes of its EPL.

A store's root attribute ``release`` names the release kind (older stores: the stored spec's
``release.kind``). Every kind but ``observed`` is *simulated*: dpaudit drew the noise from the
declared allocation, so the claim holds by construction, and an EPL above its floor (or above the
exact ε) is the release's post-processing or the estimator's small-sample and window effects,
never privacy loss — post-processing cannot add privacy loss. A TopDown release stores the bias
of its unit totals (``epl.total_bias``: empty and populated units, the populated ones by size),
which gives the number.

An ``observed`` release is a published one: its noise is not known to be the claimed noise, and
what the residuals say of the claim is the claim verdict's (:mod:`flows.report.claims`).

The replicates that would resolve an estimate (:mod:`flows.report.resolution`) are worth printing
only up to :data:`PRACTICAL_REPLICATES`, the spec's largest ``audit.replicates``; beyond it the
words say what dominates the estimate instead (:meth:`ReleaseBasis.dominates`).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from flows.report.format import fmt_int, fmt_num
from flows.report.store_data import float_values, str_values

#: The most replicates a spec may ask for (``audit.replicates``): "run ≥ N" is printed up to it.
PRACTICAL_REPLICATES = 100_000
OBSERVED = "observed"
TOPDOWN = "topdown"


@dataclass(frozen=True)
class TotalBias:
    """The mean released − true total of a level's empty (true total 0) and populated units."""

    level: str
    empty: float  # NaN: the level has no empty unit
    populated: float
    #: the populated units by true total ("1–9", "10–99", ...): their mean shift (stores written
    #: before the size classes hold none)
    by_size: tuple[tuple[str, float], ...] = ()

    def words(self) -> str:
        parts = []
        if math.isfinite(self.empty):
            parts.append(f"empty units' totals by {signed(self.empty)}")
        if math.isfinite(self.populated):
            parts.append(
                f"populated ones by {signed(self.populated)}"
                if parts
                else f"populated units' totals by {signed(self.populated)}"
            )
        sizes = [(c, b) for c, b in self.by_size if math.isfinite(b)]
        if len(sizes) > 1:
            parts[-1] += " (true total " + ", ".join(f"{c}: {signed(b)}" for c, b in sizes) + ")"
        return " and ".join(parts)

    def why(self) -> str:
        """Why the shifts have their signs: "" unless an empty unit's total rises."""
        if not (math.isfinite(self.empty) and self.empty > 0):
            return ""
        why = "a released count cannot be negative, so noise can only raise an empty unit's total"
        if math.isfinite(self.populated) and self.populated < 0:
            why += ", and keeping the levels consistent takes it back from the populated ones"
        return why


def signed(x: float) -> str:
    """A shift with its sign: "+0.83", "−0.02" (a true minus), "0"."""
    if x == 0:
        return "0"
    text = f"{abs(x):.2f}" if abs(x) >= 0.01 else fmt_num(abs(x), 2)
    return ("+" if x > 0 else "\u2212") + text


@dataclass(frozen=True)
class ReleaseBasis:
    """What the store's release is, for the words of its EPL."""

    kind: str  # the release kind ("" when the store does not say)
    published_runs: int | None = None
    bias: TotalBias | None = None  # TopDown: the level whose totals its post-processing shifts most

    @property
    def simulated(self) -> bool:
        return self.kind != OBSERVED

    @property
    def topdown(self) -> bool:
        return self.kind == TOPDOWN or self.bias is not None

    def runs(self, n: int) -> str:
        """ "8 replicates", "30 published runs"."""
        noun = "published run" if not self.simulated else "replicate"
        return f"{fmt_int(n)} {noun}{'s' if n != 1 else ''}"

    @property
    def run_word(self) -> str:
        return "runs" if not self.simulated else "replicates"

    def no_loss(self) -> str:
        """Why an estimate of a simulated release above its floor or the exact ε is no loss."""
        if self.topdown:
            if self.bias is not None and self.bias.words():
                why = self.bias.why()
                return (
                    f"TopDown's post-processing shifts {self.bias.words()} on average at level "
                    f"{self.bias.level}{' (' + why + ')' if why else ''}: bias, not loss — "
                    "post-processing cannot add privacy loss."
                )
            return (
                "TopDown's post-processing (non-negativity, consistency) shapes the residuals: "
                "bias, not loss — post-processing cannot add privacy loss."
            )
        return (
            "the estimator's small-sample and window effects dominate the estimates at these "
            "sample sizes, not loss."
        )

    def dominates(self, *, short: bool = False) -> str:
        """What dominates an estimate that more than :data:`PRACTICAL_REPLICATES` would resolve:
        TopDown's post-processing bias, else small-sample effects over the estimate's window."""
        if short:
            cause = "bias" if self.topdown and self.simulated else "its window"
            return f"{cause} dominates"
        if self.topdown and self.simulated:
            what = "its post-processing bias dominates it, not noise"
        else:
            what = "small-sample effects over its narrow window dominate it"
        return f"{what} (not even {fmt_int(PRACTICAL_REPLICATES)} {self.run_word} would resolve it)"


def release_kind(attrs: Mapping[str, Any]) -> str:
    """The root attribute ``release``, else the stored spec's ``release.kind``, else ""."""
    kind = attrs.get("release")
    if isinstance(kind, str) and kind.strip():
        return kind.strip()
    spec = attrs.get("spec_toml")
    if isinstance(spec, str):
        try:
            release = tomllib.loads(spec).get("release", {})
        except tomllib.TOMLDecodeError:
            return ""
        if isinstance(release, dict):
            return str(release.get("kind", "allocation"))
        return ""
    return ""


def total_bias(epl: xr.Dataset | None) -> TotalBias | None:
    """The level whose unit totals the post-processing shifts the most (largest |shift| of its
    empty units, else of its populated ones), from ``epl.total_bias``; ``None`` if not stored."""
    if epl is None or "total_bias" not in epl.variables or "truth_class" not in epl.coords:
        return None
    bias = float_values(epl, "total_bias")
    if bias is None or bias.ndim != 2:
        return None
    classes = str_values(epl["truth_class"].values)
    levels = str_values(epl["geolevel"].values)
    col = {c: j for j, c in enumerate(classes)}
    nan = np.full(len(levels), np.nan)
    empty = bias[:, col["empty"]] if "empty" in col else nan
    populated = bias[:, col["populated"]] if "populated" in col else nan
    for values in (empty, populated):
        size = np.where(np.isfinite(values), np.abs(values), -1.0)
        if np.any(size > 0):
            i = int(np.argmax(size))
            sizes = tuple(
                (c, float(bias[i, j])) for c, j in col.items() if c not in ("empty", "populated")
            )
            return TotalBias(levels[i], float(empty[i]), float(populated[i]), sizes)
    return None


def release_basis(attrs: Mapping[str, Any], epl: xr.Dataset | None) -> ReleaseBasis:
    """The :class:`ReleaseBasis` of a store from its root attributes and ``epl`` group."""
    runs = attrs.get("published_runs")
    return ReleaseBasis(
        kind=release_kind(attrs),
        published_runs=runs if isinstance(runs, int) and not isinstance(runs, bool) else None,
        bias=total_bias(epl),
    )
