"""The summary table ("at a glance"): one row per geolevel, and all levels composed, of what each
of the three answers says at the report's one headline δ — the Bureau's and the exact ε, the
level's largest bias-aware EPL with its interval, floor and whether it is resolved
(:mod:`flows.report.epl_headline`, the numbers of the summary box too), the MPL lower bound and the
claim verdict (:mod:`flows.report.claims`; a column only when the store holds verdicts).
The reduced noise (at Su, Su & Wang's δ*) is in the accounting section, beside the other δ."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import xarray as xr

from flows.report.claims import NOT_JUDGED, VERDICT_CLASS, Claims, evidence_words
from flows.report.epl_headline import LevelEpl, flag_class, level_epls
from flows.report.format import fmt_bracket, fmt_delta, fmt_num, fmt_range, is_finite
from flows.report.mpl_bound import NOTE as VACUOUS_NOTE
from flows.report.mpl_bound import VACUOUS, fmt_lb
from flows.report.release_basis import ReleaseBasis, release_basis
from flows.report.resolution import resolutions
from flows.report.store_data import attr_str, headline_delta, str_values, var_values


def _level_index(ds: xr.Dataset | None) -> dict[str, int]:
    if ds is None or "geolevel" not in ds.coords:
        return {}
    return {g: i for i, g in enumerate(str_values(ds["geolevel"].values))}


@dataclass
class SummarySection:
    product: str
    universe: str
    delta: str
    rows: list[dict[str, str]]
    mpl_alpha: str | None
    notes: list[str]
    fdp: bool = False  # the mpl group holds the f-DP gap: one more column
    claims: bool = False  # the store holds claim verdicts: one more column
    claims_note: str = ""


def _fdp_gap_cell(mpl: xr.Dataset | None, levels: Mapping[str, int], level: str) -> str:
    gap = var_values(mpl, "fdp_gap") if mpl is not None else None
    if gap is None or level not in levels:
        return "—"
    return fmt_num(float(gap[levels[level]]), 3)


def _mpl_cell(mpl: xr.Dataset | None, levels: Mapping[str, int], level: str) -> str:
    if mpl is None:
        return "not run"
    lb = var_values(mpl, "lb")
    if lb is None or level not in levels:
        return "not run"
    return fmt_lb(float(lb[levels[level]]), 4)


def _claim_cells(claims: Claims | None, level: str) -> dict[str, str]:
    """The verdict word, its class and its sentence (the cell's hover; under the word when the
    claim is not consistent) and evidence."""
    c = claims.levels.get(level) if claims is not None else None
    if c is None:
        return {
            "claim": "—" if claims is not None else NOT_JUDGED,
            "claim_class": "",
            "claim_sentence": "",
            "claim_title": "",
        }
    title = " ".join(
        t for t in (c.sentence, f"({evidence_words(c)})" if evidence_words(c) else "") if t
    )
    return {
        "claim": c.verdict,
        "claim_class": VERDICT_CLASS.get(c.verdict, ""),
        "claim_sentence": c.sentence if c.verdict != "consistent" else "",
        "claim_title": title,
    }


def _epl_cells(
    head: LevelEpl | None, ran: bool, basis: ReleaseBasis | None = None
) -> dict[str, str]:
    if head is None:
        return {
            "epl": "—" if ran else "not run",
            "epl_floor": "—",
            "epl_flag": "",
            "epl_flag_class": "",
            "epl_query": "",
        }
    return {
        "epl": head.text,
        "epl_floor": fmt_num(head.floor, 3),
        "epl_flag": head.flag,
        "epl_flag_class": flag_class(head.flag, simulated=basis is not None and basis.simulated),
        "epl_query": head.query,
    }


def summary_section(
    attrs: Mapping[str, Any],
    acc: xr.Dataset | None,
    epl: xr.Dataset | None,
    mpl: xr.Dataset | None,
    replicates: int | None = None,
    claims: Claims | None = None,
) -> SummarySection | None:
    """One row per geolevel (and all levels composed) of what each of the three answers says,
    and the claim verdict of each level (``claims``; ``None``: the store holds none)."""
    # a published table's level tested as a declared geolevel shares that geolevel's row
    alias = (
        {
            str(c.evidence["measured_at"]): c.level
            for c in claims.levels.values()
            if c.evidence.get("measured_at") and c.evidence["measured_at"] != c.level
        }
        if claims is not None and not claims.simulated
        else {}
    )
    epl_idx = {alias.get(g, g): i for g, i in _level_index(epl).items()}
    shown = {g: t for t, g in alias.items() if g in epl_idx}
    level_order: list[str] = []
    for idx in (_level_index(acc), epl_idx, _level_index(mpl)):
        for g in idx:
            if g not in level_order:
                level_order.append(g)
    if not level_order:
        return None
    acc_idx, mpl_idx = _level_index(acc), _level_index(mpl)
    hd = headline_delta(acc)
    j, delta = hd if hd is not None else (None, None)
    basis = release_basis(attrs, epl)
    heads = level_epls(epl, resolutions(epl, replicates), basis) if epl is not None else {}

    def acc_cells(prefix: str, i: int | None) -> dict[str, str]:
        def get(name: str) -> np.ndarray | None:
            return var_values(acc, prefix + name)

        def at(a: np.ndarray | None, *idx: int) -> float:
            if a is None:
                return math.nan
            return float(a[idx]) if idx else float(a)

        ix: tuple[int, ...] = () if i is None else (i,)
        bu, lo, hi = get("eps_bureau"), get("eps_exact_lower"), get("eps_exact_upper")
        out = {"bureau": "—", "exact": "—", "exact_full": ""}
        if j is not None:
            b = at(bu, *ix, j)
            # an allocation file with pure eps-DP noise: no zCDP conversion (the reason: accounting)
            na = bool(attr_str(getattr(acc, "attrs", {}), "bureau_na", "")) and not math.isfinite(b)
            out["bureau"] = "n/a" if na else fmt_num(b, 5)
            out["exact"] = fmt_bracket(at(lo, *ix, j), at(hi, *ix, j))
            out["exact_full"] = f"[{at(lo, *ix, j)!r}, {at(hi, *ix, j)!r}]"
        out["sigma2"] = fmt_range(at(get("sigma2_min"), *ix), at(get("sigma2_max"), *ix))
        return out

    rows: list[dict[str, str]] = []
    for level in level_order:
        label = f"{level} (at {shown[level]})" if level in shown else level
        row: dict[str, str] = {"geolevel": label, "composed": ""}
        if acc is not None and level in acc_idx:
            row.update(acc_cells("", acc_idx[level]))
        else:
            row.update({"bureau": "—", "exact": "—", "exact_full": "", "sigma2": "—"})
        row.update(
            _epl_cells(
                heads.get(epl_idx[level]) if level in epl_idx else None, epl is not None, basis
            )
        )
        row.update(_claim_cells(claims, level))
        row["mpl"] = _mpl_cell(mpl, mpl_idx, level)
        row["fdp_gap"] = _fdp_gap_cell(mpl, mpl_idx, level)
        rows.append(row)
    if acc is not None and "composed_eps_bureau" in acc:
        row = {"geolevel": "all levels composed", "composed": "composed"}
        row.update(acc_cells("composed_", None))
        s2min, s2max = var_values(acc, "sigma2_min"), var_values(acc, "sigma2_max")
        if s2min is not None and s2max is not None and s2min.size:
            row["sigma2"] = fmt_range(np.min(s2min), np.max(s2max))
        row.update(_epl_cells(None, True) | {"mpl": "—", "fdp_gap": "—"})
        row.update(_claim_cells(claims, "") | {"claim": "—"})
        rows.append(row)

    notes = []
    if acc is None:
        notes.append("No accounting group: the Bureau's and the exact ε are not shown.")
    if epl is None:
        notes.append("No epl group: EPL was not estimated.")
    if acc is not None and claims is None:
        notes.append(
            "No claims group: the claim is not judged (this store was written before dpaudit "
            "stored a claim verdict per level)."
        )
    if mpl is None:
        notes.append(
            "No mpl group: maximum privacy loss lower bounds were not run for this store "
            "(dpaudit mpl-coverage checks the method on mechanisms with known ε)."
        )
    if any(r["mpl"] == VACUOUS for r in rows):
        notes.append(VACUOUS_NOTE)
    alpha = mpl.attrs.get("alpha") if mpl is not None else None
    return SummarySection(
        product=attr_str(attrs, "allocation_id", "") or attr_str(attrs, "release"),
        universe=" · ".join(
            v for v in (attr_str(attrs, "universe", ""), attr_str(attrs, "region", "")) if v
        )
        or "—",
        delta=fmt_delta(delta) if delta is not None else "—",
        rows=rows,
        mpl_alpha=fmt_num(alpha, 3) if is_finite(alpha) else None,
        notes=notes,
        fdp=mpl is not None and "fdp_gap" in mpl,
        claims=claims is not None,
        claims_note=claims.note() if claims is not None else "",
    )
