"""The terminal tables of ``account`` and ``calibrate`` (their ``--json`` output is the dict
itself).

Every table fits the terminal (``COLUMNS``; 80 when piped): one line per level and δ (or ε), a
level's ρ and σ² on its first line only; level names wrap at their spaces and never truncate; a
column every row shares (the method) is said once below the table. A table that still does not fit
prints one block of lines per row instead. Certified values print as the report prints them
(:func:`flows.report.format.fmt_bracket`): to the digits both ends of the bracket round to, or a
bracket to one digit past where its ends differ — never a bracket with equal ends.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from typing import Any

from flows.report.format import fmt_bracket, fmt_delta


def value_key(method: str) -> str | None:
    if method in ("auto", "exact", "bracket"):
        return "exact"
    if method == "paper-bound":
        return "paper_bound"
    return None


def _sig(x: float, digits: int, rounding: str = ROUND_HALF_EVEN) -> str:
    """``x`` to ``digits`` significant digits (``rounding``: outwards with floor or ceiling)."""
    d = Decimal(repr(float(x)))
    if d == 0:
        return "0"
    q = Decimal(1).scaleb(d.adjusted() - digits + 1)
    return f"{float(d.quantize(q, rounding=rounding)):.{digits}g}"


def fmt_relative(lower: float, upper: float, sig: int = 4) -> str:
    """A certified bracket of a small number (δ): the value to ``sig`` significant digits if both
    ends round to it, else a bracket to one digit past the first at which they differ, rounded
    outwards."""
    if not (math.isfinite(lower) and math.isfinite(upper)):
        return "—"
    lower, upper = min(lower, upper), max(lower, upper)
    differ = next((k for k in range(1, 16) if _sig(lower, k) != _sig(upper, k)), None)
    if differ is None or differ > sig:
        return _sig(upper, sig)
    digits = differ + 1
    return f"[{_sig(lower, digits, ROUND_FLOOR)}, {_sig(upper, digits, ROUND_CEILING)}]"


def _sigma2(r: dict[str, Any]) -> str:
    if math.isclose(r["sigma2_min"], r["sigma2_max"]):
        return f"{r['sigma2_min']:.2f}"
    return f"{r['sigma2_min']:.2f}–{r['sigma2_max']:.2f}"


@dataclass
class Listing:
    """A table as columns and rows of text, printed as a table if it fits, else as records."""

    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    #: rows that continue the previous record (its first line holds the level)
    continued: list[bool] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    left: tuple[int, ...] = (0,)  # left-aligned columns
    own: tuple[int, ...] = ()  # columns of the level itself (on its first line only)

    def add(self, cells: list[str], *, continued: bool = False) -> None:
        self.rows.append(cells)
        self.continued.append(continued)

    def print(self) -> None:
        from rich.console import Console

        console = Console()
        with console.capture() as capture:
            console.print(self._table())
        text = capture.get()
        if self._fits(text, console.width):
            console.out(text, end="", highlight=False)
        else:
            self._records(console)
        for note in self.notes:
            console.print(note, highlight=False)

    def _fits(self, text: str, width: int) -> bool:
        """Whether the rendered table fits ``width`` with nothing cut: no ellipsis, no line too
        long, every word of every header and cell whole."""
        lines = text.splitlines()
        if "…" in text or any(len(line.rstrip()) > width for line in lines):
            return False
        words = {w for line in lines for w in line.split()}
        cells = [*self.columns, *(c for row in self.rows for c in row)]
        return all(w in words for c in cells for w in c.split())

    def _table(self) -> Any:
        from rich import box
        from rich.table import Table

        t = Table(
            title=self.title,
            box=box.SIMPLE_HEAD,
            padding=(0, 1),
            pad_edge=False,
            show_edge=False,
            title_justify="left",
        )
        for k, name in enumerate(self.columns):
            if k == 0:
                # wraps at spaces, never inside a word: at least as wide as the longest word
                longest = max((len(w) for r in self.rows for w in r[0].split()), default=len(name))
                t.add_column(name, min_width=max(longest, len(name)), overflow="fold")
            else:
                t.add_column(name, justify="left" if k in self.left else "right", no_wrap=True)
        grouped = any(self.continued)  # several lines per level: a rule between levels
        for k, cells in enumerate(self.rows):
            last = k + 1 == len(self.rows) or not self.continued[k + 1]
            t.add_row(*cells, end_section=grouped and last and k + 1 < len(self.rows))
        return t

    def _records(self, console: Any) -> None:
        """One block per level: its name; its own columns (ρ, σ², method); one line per δ (or
        ε) of the others — ``column value`` pairs wrapped to the width."""
        width = max(console.width, 40)

        def out(pairs: list[str]) -> None:
            """The pairs joined by " · ", a line broken only between pairs."""
            lines = ["  " + pairs[0]] if pairs else []
            for pair in pairs[1:]:
                if len(lines[-1]) + 3 + len(pair) <= width:
                    lines[-1] += " · " + pair
                else:
                    lines.append("    " + pair)
            for line in lines:
                console.out(line, highlight=False)

        console.out(textwrap.fill(self.title, width=width), highlight=False)
        for cells, cont in zip(self.rows, self.continued, strict=True):
            named = list(zip(self.columns, cells, strict=True))[1:]
            own = [f"{n} {v}" for k, (n, v) in enumerate(named, 1) if k in self.own and v]
            point = [f"{n} {v}" for k, (n, v) in enumerate(named, 1) if k not in self.own and v]
            if not cont:
                console.out(cells[0], highlight=False)
                if own:
                    out(own)
            out(point)


def _width(console: Any, table: Any) -> int:
    from rich.measure import Measurement

    return int(Measurement.get(console, console.options, table).maximum)


def _shared(rows: list[dict[str, Any]], key: str) -> str | None:
    values = {str(r.get(key, "")) for r in rows}
    return values.pop() if len(values) == 1 else None


def print_account(result: dict[str, Any]) -> None:
    method = result.get("method", "auto")
    by_eps = bool(result.get("epsilons"))
    key = value_key(method)
    label = {"exact": "exact", "paper_bound": "paper bound"}.get(key or "", "")
    sym, at = ("δ", "ε") if by_eps else ("ε", "δ")
    rows = [*result["levels"], *([result["composed"]] if "composed" in result else [])]
    shared = _shared(rows, "method")
    conversion = "CKS" if method == "zcdp-cks" else "Bureau"
    columns = ["level", "ρ", "σ²", at, f"{conversion} {sym}"]
    if key:
        columns.append(f"{label} {sym}")
    if shared is None:
        columns.append("method")
    listing = Listing(
        title=f"{result['allocation']} · {result['universe']} · {result['region']} · "
        f"neighbours={result['neighbours']}",
        columns=columns,
        left=(len(columns) - 1,) if shared is None else (),
        own=(1, 2, len(columns) - 1) if shared is None else (1, 2),
    )
    for r in rows:
        for k, e in enumerate(r["delta" if by_eps else "epsilon"]):
            point = e["epsilon" if by_eps else "delta"]
            conv = e["cks" if method == "zcdp-cks" else "bureau"]
            cells = [
                r["geolevel"] if k == 0 else "",
                f"{r['rho']:.4f}" if k == 0 else "",
                _sigma2(r) if k == 0 else "",
                f"{point:g}" if by_eps else fmt_delta(point),
                f"{conv:.4g}" if by_eps else f"{conv:.3f}",
            ]
            if key:
                lo, hi = e[f"{key}_lower"], e[f"{key}_upper"]
                cells.append(fmt_relative(lo, hi) if by_eps else fmt_bracket(lo, hi))
            if shared is None:
                cells.append(r["method"] if k == 0 else "")
            listing.add(cells, continued=k > 0)
    if shared is not None:
        listing.notes.append(f"method: {shared}")
    listing.notes.append(
        f"{label or method} {sym}: certified to the digits shown, or a certified bracket; "
        "--json gives both ends."
        if key
        else f"{method}: a conversion of ρ-zCDP (an upper bound, not the exact value)."
    )
    listing.print()


def print_calibration(result: dict[str, Any]) -> None:
    rows = [*result["levels"], *([result["composed"]] if "composed" in result else [])]
    shared = _shared(rows, "accounting")
    columns = ["level", "ρ", "σ²", "target ε", "reduced σ²", "variance cut"]
    if shared is None:
        columns.append("accounting")
    listing = Listing(
        title=f"{result['allocation']} · {result['universe']} · {result['region']} · "
        f"neighbours={result['neighbours']} · δ*={fmt_delta(result['delta'])} · "
        f"method={result['method']}",
        columns=columns,
        left=(len(columns) - 1,) if shared is None else (),
    )
    for r in rows:
        reduced = (
            f"{0.5 * (r['reduced_sigma2_lower'] + r['reduced_sigma2_upper']):.4f}"
            if "reduced_sigma2_lower" in r
            else f"× {0.5 * (r['factor_lower'] + r['factor_upper']):.6f}"
        )
        cut = 50 * (r["variance_cut_lower"] + r["variance_cut_upper"])
        cells = [
            r["geolevel"],
            f"{r['rho']:.4f}",
            _sigma2(r),
            f"{r['target_epsilon']:.5f}",
            reduced,
            f"{cut:.2f} %",
        ]
        if shared is None:
            cells.append(r["accounting"])
        listing.add(cells)
    if shared is not None:
        listing.notes.append(f"accounting: {shared}")
    listing.notes.append(
        "certified: the exact factor lies in \\[factor_lower, factor_upper] (--json); "
        "the digits shown are within that interval."
    )
    listing.print()
