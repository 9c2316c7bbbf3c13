"""A comparison of two audits (:class:`flows.report.compare.Comparison`) as text: the cells of its
rows (the at-a-glance table's formats), a plain table that fits 80 columns, CSV and JSON. The claim
verdicts line up in the table (a line per level) and in JSON (``claim_rows``); the CSV holds the
numbers only."""

from __future__ import annotations

import csv
import io
import math
import textwrap
from collections import Counter
from typing import Any

from flows.report.compare import MEASURES, ClaimRow, Comparison, Row
from flows.report.compare_data import Estimate
from flows.report.epl_headline import estimate_text
from flows.report.format import fmt_bracket, fmt_delta, fmt_num, is_finite
from flows.report.mpl_bound import fmt_lb, vacuous

WIDTH = 80
#: label, A, B, B − A, B/A (the status follows after two spaces)
COLUMNS = (12, 17, 17, 10, 7)


def value_text(measure: str, e: Estimate | None, *, interval: bool = True) -> str:
    """A number as the at-a-glance table prints it (EPL and MPL with their interval)."""
    if e is None:
        return "—"
    if measure == "bureau_eps":
        return fmt_num(e.value, 5)
    if measure == "exact_eps":
        return fmt_bracket(e.low, e.high)
    if measure == "epl":
        return estimate_text(e.value, e.low, e.high) if interval else fmt_num(e.value, 3)
    text = fmt_lb(e.value, 4) if measure == "mpl_lb" else fmt_num(e.value, 4)
    if interval and is_finite(e.low) and is_finite(e.high):
        text += f" [{fmt_num(e.low, 3)}, {fmt_num(e.high, 3)}]"
    return text


def interval_text(e: Estimate | None) -> str:
    if e is None or not (is_finite(e.low) and is_finite(e.high)):
        return ""
    return f"[{fmt_num(e.low, 3)}, {fmt_num(e.high, 3)}]"


def diff_text(x: float) -> str:
    if not is_finite(x):
        return "—"
    if x == 0:
        return "0"
    return ("+" if x > 0 else "") + fmt_num(x, 3)


def ratio_text(x: float) -> str:
    return fmt_num(x, 4) if is_finite(x) else "—"


def _line(label: str, a: str, b: str, d: str = "", r: str = "", status: str = "") -> str:
    wl, wa, wb, wd, wr = COLUMNS
    text = f"{label:<{wl}}{a:>{wa}}{b:>{wb}}{d:>{wd}}{r:>{wr}}"
    return (text + "  " + status if status else text).rstrip()


def _wrap(text: str, indent: str = "") -> list[str]:
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=indent,
        subsequent_indent=indent + "    ",
        break_long_words=True,
        break_on_hyphens=False,
    )


def _row_lines(row: Row, label: str) -> list[str]:
    lines = [
        _line(
            label,
            value_text(row.measure, row.a, interval=False),
            value_text(row.measure, row.b, interval=False),
            diff_text(row.diff),
            ratio_text(row.ratio),
            row.status,
        )
    ]
    if row.measure in ("epl", "mpl_lb"):
        ia, ib = interval_text(row.a), interval_text(row.b)
        if ia or ib:
            lines.append(_line("    interval", ia, ib))
    return lines


def claim_lines(row: ClaimRow) -> list[str]:
    """A level's claim verdicts; a changed one with the sentence of each store."""
    lines = [_line("  claim", row.a, row.b, "", "", row.status)]
    if row.status == "changed":
        for side, sentence in (("A", row.a_sentence), ("B", row.b_sentence)):
            if sentence:
                lines += _wrap(f"{side}: {sentence}", "    ")
    return lines


def claims_changed_text(c: Comparison) -> str:
    """ "The claim verdict changed at County (consistent → refuted)." ("" when none did)."""
    changed = c.changed_claims
    if not changed:
        return ""
    where = ", ".join(f"{r.geolevel} ({r.a} → {r.b})" for r in changed)
    return f"The claim verdict changed at {where}."


def header_lines(c: Comparison) -> list[str]:
    lines = _wrap(f"A: {c.a_path} (run {c.a_run_id})") + _wrap(f"B: {c.b_path} (run {c.b_run_id})")
    if c.delta is not None:
        lines += _wrap(f"ε at the headline δ = {fmt_delta(c.delta)}; differences are B − A.")
    for note in c.notes:
        lines += _wrap(f"Note: {note}.")
    if c.spec_differences:
        lines.append("Spec differences (A → B):")
        for key, va, vb in c.spec_differences:
            lines += _wrap(f"{key}: {va} → {vb}", "  ")
    else:
        lines.append("Spec differences: none (output and cluster sections aside).")
    if c.only_in_a:
        lines += _wrap("Levels only in A: " + ", ".join(c.only_in_a))
    if c.only_in_b:
        lines += _wrap("Levels only in B: " + ", ".join(c.only_in_b))
    return lines


def legend(c: Comparison) -> str:
    parts = ["exact ε: certified bracket"]
    if c.claim_rows:
        parts.append("claim: the verdict on the declared ε ('changed' when the verdicts differ)")
    if c.epl_interval:
        parts.append(f"EPL: bias-aware, {c.epl_interval} bootstrap interval")
    if is_finite(c.mpl_alpha):
        conf = fmt_num(1 - 2 * c.mpl_alpha, 3)
        parts.append(
            f"MPL: lower bound (α = {fmt_num(c.mpl_alpha, 3)}), interval two-sided at {conf}"
        )
    return (
        "; ".join(parts) + ". A change is 'within noise' when the two intervals overlap, "
        "'changed' when they do not."
    )


def verdict(c: Comparison) -> str:
    if c.no_change:
        return "No change: the same spec and the same numbers."
    n = len(c.changed)
    claims = claims_changed_text(c)
    if n == 0:
        text = "No number changed beyond its interval or bracket."
    else:
        text = (
            f"{n} number{'s' if n != 1 else ''} changed beyond "
            f"{'their' if n != 1 else 'its'} interval or bracket."
        )
    return f"{text} {claims}" if claims else text


def table_text(c: Comparison) -> str:
    """The comparison as a plain-text table, no line longer than :data:`WIDTH`."""
    lines = ["dpaudit compare", *header_lines(c), ""]
    lines.append(_line("level", "A", "B", "B − A", "B/A", "status"))
    lines.append("-" * (sum(COLUMNS) + 2 + len("within noise")))
    claims = {r.geolevel: r for r in c.claim_rows}
    level = ""
    for row in c.rows:
        if row.geolevel != level:
            if level in claims:
                lines += claim_lines(claims.pop(level))
            level = row.geolevel
            lines.append(level)
        lines += _row_lines(row, "  " + MEASURES[row.measure])
    if level in claims:
        lines += claim_lines(claims.pop(level))
    for rest in claims.values():  # a level judged but without numbers in both stores
        lines.append(rest.geolevel)
        lines += claim_lines(rest)
    if c.query_rows:
        counts = Counter(r.status for r in c.query_rows)
        lines.append("")
        lines += _wrap(
            f"EPL per query ({len(c.query_rows)} in both stores): "
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            + (
                "; the changed ones:"
                if any(r.status not in ("same", "within noise") for r in c.query_rows)
                else "."
            )
        )
        for row in c.query_rows:
            if row.status in ("same", "within noise"):
                continue
            lines += _wrap(f"{row.geolevel} · {row.query}", "  ")
            lines += _row_lines(row, "")
    lines.append("")
    lines += _wrap(legend(c))
    lines += _wrap(verdict(c))
    return "\n".join(lines) + "\n"


CSV_FIELDS = (
    "geolevel",
    "query",
    "measure",
    "a",
    "a_low",
    "a_high",
    "b",
    "b_low",
    "b_high",
    "b_minus_a",
    "b_over_a",
    "status",
)


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _side(e: Estimate | None) -> dict[str, Any]:
    if e is None:
        return {"value": None, "low": None, "high": None, "query": None}
    return {
        "value": _num(e.value),
        "low": _num(e.low),
        "high": _num(e.high),
        "query": e.query or None,
    }


def row_dict(row: Row) -> dict[str, Any]:
    a, b = _side(row.a), _side(row.b)
    if row.measure == "mpl_lb":  # a bound at or below 0 reads as 0 and says nothing
        for side, e in ((a, row.a), (b, row.b)):
            side["vacuous"] = None if e is None else vacuous(e.value)
    return {
        "geolevel": row.geolevel,
        "query": row.query or None,
        "measure": row.measure,
        "a": a,
        "b": b,
        "b_minus_a": _num(row.diff),
        "b_over_a": _num(row.ratio),
        "status": row.status,
    }


def csv_text(c: Comparison) -> str:
    """One line per row (levels, then per-query EPL); full precision, empty where absent."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_FIELDS)

    def num(x: float | None) -> str:
        return "" if x is None else repr(float(x))

    for row in (*c.rows, *c.query_rows):
        d = row_dict(row)
        w.writerow(
            [
                row.geolevel,
                row.query,
                row.measure,
                *(num(d[s][k]) for s in ("a", "b") for k in ("value", "low", "high")),
                num(d["b_minus_a"]),
                num(d["b_over_a"]),
                row.status,
            ]
        )
    return buf.getvalue()


def json_dict(c: Comparison) -> dict[str, Any]:
    return {
        "a": {"store": c.a_path, "run_id": c.a_run_id},
        "b": {"store": c.b_path, "run_id": c.b_run_id},
        "delta": c.delta,
        "notes": c.notes,
        "spec_differences": [{"key": k, "a": a, "b": b} for k, a, b in c.spec_differences],
        "levels_only_in_a": c.only_in_a,
        "levels_only_in_b": c.only_in_b,
        "epl_interval": c.epl_interval or None,
        "mpl_alpha": _num(c.mpl_alpha),
        "no_change": c.no_change,
        "changed": len(c.changed),
        "rows": [row_dict(r) for r in c.rows],
        "query_rows": [row_dict(r) for r in c.query_rows],
        "claim_rows": [
            {
                "geolevel": r.geolevel,
                "a": r.a,
                "b": r.b,
                "status": r.status,
                "a_sentence": r.a_sentence or None,
                "b_sentence": r.b_sentence or None,
            }
            for r in c.claim_rows
        ],
        "claims_changed": len(c.changed_claims),
    }
