"""The numbers of one audit store that a comparison of two audits lines up (:mod:`flows.report.compare`):
per geolevel the Bureau's and the exact ε over the stored δ, the headline EPL with its interval (the
at-a-glance table's, :func:`flows.report.epl_headline.level_epls`), the bias-aware EPL of every query,
the MPL lower bound with its two-sided interval and the claim verdict (:mod:`flows.report.claims`;
none in a store written before verdicts were stored); the store's spec and its kind.

Everything is read once and the groups closed: the result holds plain floats and arrays.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xarray as xr

from flows.report.claims import read_claims
from flows.report.epl_headline import level_epls, ok_mask
from flows.report.mpl_bound import shown
from flows.report.store_data import (
    CLAIMS_GROUP,
    COVERAGE_GROUP,
    FDP_COVERAGE_GROUP,
    StoreLike,
    epl_interval_label,
    float_values,
    headline_delta,
    open_store,
    parse_spec_toml,
    store_arg,
    str_values,
)

#: the label of the row of all levels composed (as in the at-a-glance table)
COMPOSED = "all levels composed"

#: what wrote a store, by the groups it holds (the first that matches)
KINDS: tuple[tuple[str, str, str], ...] = (
    ("accounting", "audit", "dpaudit run"),
    ("epl", "audit", "dpaudit run"),
    (COVERAGE_GROUP, "mpl-coverage", "dpaudit mpl-coverage"),
    (FDP_COVERAGE_GROUP, "fdp-coverage", "dpaudit fdp-coverage"),
    ("direct", "direct", "dpaudit direct"),
    ("accounting_sweep", "sweep", "dpaudit sweep"),
)


def store_kind(groups: Iterable[str]) -> tuple[str, str]:
    """(kind, the command that writes it) of a store holding ``groups``; ("unknown", "") if none."""
    held = set(groups)
    for group, kind, command in KINDS:
        if group in held:
            return kind, command
    return "unknown", ""


@dataclass(frozen=True)
class Estimate:
    """One number of a store with the interval it is read against (NaN ends: none), and the query
    it belongs to (a level's headline EPL: the query where it is largest)."""

    value: float
    low: float = math.nan
    high: float = math.nan
    query: str = ""

    def same_as(self, other: Estimate) -> bool:
        def eq(x: float, y: float) -> bool:
            return x == y or (math.isnan(x) and math.isnan(y))

        return eq(self.value, other.value) and eq(self.low, other.low) and eq(self.high, other.high)


@dataclass
class AuditNumbers:
    """What a comparison needs of one audit store (levels in the at-a-glance table's order)."""

    path: str
    attrs: dict[str, Any]
    spec: dict[str, Any]
    levels: list[str]
    deltas: list[float]
    headline_delta: float | None
    #: per level (and :data:`COMPOSED`): ε over :attr:`deltas`
    eps_bureau: dict[str, np.ndarray] = field(default_factory=dict)
    eps_exact_lower: dict[str, np.ndarray] = field(default_factory=dict)
    eps_exact_upper: dict[str, np.ndarray] = field(default_factory=dict)
    epl: dict[str, Estimate] = field(default_factory=dict)
    epl_query: dict[tuple[str, str], Estimate] = field(default_factory=dict)
    mpl: dict[str, Estimate] = field(default_factory=dict)
    #: per accounted level: its claim verdict and sentence (empty: the store holds no verdicts)
    claims: dict[str, tuple[str, str]] = field(default_factory=dict)
    epl_interval: str = ""
    mpl_alpha: float = math.nan
    has_accounting: bool = False
    has_epl: bool = False
    has_mpl: bool = False
    has_claims: bool = False


def _levels(ds: xr.Dataset | None) -> list[str]:
    if ds is None or "geolevel" not in ds.coords:
        return []
    return str_values(ds["geolevel"].values)


def _accounting(acc: xr.Dataset, out: AuditNumbers) -> None:
    out.has_accounting = True
    out.deltas = [float(d) for d in np.asarray(acc["delta"].values, dtype=np.float64)]
    hd = headline_delta(acc)
    out.headline_delta = hd[1] if hd is not None else None
    for prefix, labels in (("", _levels(acc)), ("composed_", [COMPOSED])):
        names = ("eps_bureau", "eps_exact_lower", "eps_exact_upper")
        arrays = [float_values(acc, prefix + n) for n in names]
        if any(a is None for a in arrays):
            continue
        for i, level in enumerate(labels):
            for target, a in zip(
                (out.eps_bureau, out.eps_exact_lower, out.eps_exact_upper), arrays, strict=True
            ):
                assert a is not None
                target[level] = np.atleast_2d(a)[i] if prefix == "" else np.asarray(a)


def _epl(epl: xr.Dataset, out: AuditNumbers) -> None:
    out.has_epl = True
    out.epl_interval = epl_interval_label(epl)[0]
    levels = _levels(epl)
    for i, head in level_epls(epl, {}).items():
        out.epl[levels[i]] = Estimate(head.value, head.low, head.high, head.query)
    ba = float_values(epl, "epl_bias_aware")
    if ba is None or "query" not in epl.coords:
        return
    lo, hi = float_values(epl, "epl_ci_low"), float_values(epl, "epl_ci_high")
    ok = ok_mask(epl)
    for i, level in enumerate(levels):
        for q, query in enumerate(str_values(epl["query"].values)):
            if ok[i, q] and math.isfinite(ba[i, q]):
                out.epl_query[(level, query)] = Estimate(
                    float(ba[i, q]),
                    float(lo[i, q]) if lo is not None else math.nan,
                    float(hi[i, q]) if hi is not None else math.nan,
                    query,
                )


def _mpl(mpl: xr.Dataset, out: AuditNumbers) -> None:
    """The lower bound ``lb`` = ℓ̂* + z_α σ̂/c_N (z_α < 0) with the two-sided interval at level
    1 − 2α around ℓ̂* (``loss_star``): [lb, 2 ℓ̂* − lb]; a bound at or below 0 says nothing (ε ≥ 0):
    read as 0 (:func:`flows.report.mpl_bound.shown`), the interval's lower end too."""
    out.has_mpl = True
    try:
        out.mpl_alpha = float(mpl.attrs.get("alpha", math.nan))
    except (TypeError, ValueError):
        out.mpl_alpha = math.nan
    lb, loss = float_values(mpl, "lb"), float_values(mpl, "loss_star")
    if lb is None:
        return
    for i, level in enumerate(_levels(mpl)):
        raw = float(lb[i])
        v = shown(raw)
        high = 2.0 * float(loss[i]) - raw if loss is not None else math.nan
        out.mpl[level] = Estimate(v, v if math.isfinite(high) else math.nan, high)


def audit_numbers(
    store: StoreLike, storage_options: Mapping[str, Any] | None = None
) -> AuditNumbers:
    """The numbers of the audit store ``store`` (:func:`~flows.report.store_data.store_arg`) a
    comparison lines up."""
    rs = store_arg(store, storage_options)
    root_attrs, groups = open_store(rs)
    attrs: dict[str, Any] = {}
    if groups.get("summary") is not None:
        attrs.update(groups["summary"].attrs)  # type: ignore[union-attr]
    attrs.update(root_attrs or {})
    acc, epl, mpl = groups["accounting"], groups["epl"], groups["mpl"]
    order: list[str] = []
    for ds in (acc, epl, mpl):
        order += [g for g in _levels(ds) if g not in order]
    out = AuditNumbers(
        path=rs.shown,
        attrs=attrs,
        spec=parse_spec_toml(attrs.get("spec_toml")),
        levels=order,
        deltas=[],
        headline_delta=None,
    )
    try:
        if acc is not None and "delta" in acc.coords:
            _accounting(acc, out)
        if epl is not None:
            _epl(epl, out)
        if mpl is not None:
            _mpl(mpl, out)
        claims = read_claims(groups.get(CLAIMS_GROUP))
        if claims is not None:
            out.has_claims = True
            out.claims = {g: (c.verdict, c.sentence) for g, c in claims.levels.items()}
    finally:
        for ds in groups.values():
            if ds is not None:
                ds.close()
    return out
