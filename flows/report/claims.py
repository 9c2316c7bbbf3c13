"""The claim verdict of each accounted level, as every face shows it: the store's ``claims`` group
(``storage/schema.py``) — ``consistent``, ``refuted`` or ``undecided`` per geolevel, with its
evidence and the one sentence every face prints — read into plain values, and its words: the
report's summary point, the at-a-glance cells, one line for the CLI and the Prefect artifact.

A store without the group (written before verdicts were stored) reads as ``None``: its levels are
"not judged", and nothing else changes.
"""

from __future__ import annotations

import json
import math
import textwrap
from dataclasses import dataclass, field
from typing import Any

import xarray as xr

from flows.report.format import fmt_num, is_finite
from flows.report.store_data import str_values

CONSISTENT, REFUTED, UNDECIDED = "consistent", "refuted", "undecided"
#: the verdicts, the weightiest first (the order of the summary's words)
VERDICTS = (REFUTED, UNDECIDED, CONSISTENT)
NOT_JUDGED = "not judged"
#: CSS class of each verdict in the report
VERDICT_CLASS = {CONSISTENT: "ok", REFUTED: "alert", UNDECIDED: "warn"}
#: what a basis means, in the summary's words
BASIS_WORDS = {
    "simulated": "noise drawn by dpaudit from the declared allocation",
    "observed": "the published runs' residuals",
}


@dataclass(frozen=True)
class LevelClaim:
    level: str
    verdict: str
    sentence: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Claims:
    """The verdicts of a store, per level in the group's order, and how they were reached."""

    levels: dict[str, LevelClaim]
    alpha: float = math.nan  # familywise error rate
    n_tests: int | None = None
    basis: str = ""  # "simulated" | "observed"
    delta: float = math.nan
    rule: str = ""

    @property
    def simulated(self) -> bool:
        return self.basis == "simulated"

    def verdict(self, level: str) -> str:
        c = self.levels.get(level)
        return c.verdict if c is not None else NOT_JUDGED

    def by_verdict(self) -> dict[str, list[LevelClaim]]:
        out: dict[str, list[LevelClaim]] = {}
        for c in self.levels.values():
            out.setdefault(c.verdict, []).append(c)
        return {v: out[v] for v in (*VERDICTS, *out) if v in out}

    def measured_at(self) -> str:
        """A published release: which table level each tested declared geolevel is measured at
        ("" for a simulated release or a store that does not say)."""
        pairs = [
            (c.level, str(c.evidence["measured_at"]))
            for c in self.levels.values()
            if c.evidence.get("measured_at")
        ]
        if self.simulated or not pairs:
            return ""
        post = {str(c.evidence.get("post_processing", "")) for c in self.levels.values()} - {""}
        if post:  # declared post-processed: every level of the table is measured on its own
            at = ", ".join(f"{g} at {t}" for g, t in pairs)
            how = "TopDown" if post == {"topdown"} else ", ".join(sorted(post))
            return (
                f"Measured: {at} (the table's levels); each tested against dpaudit's own {how} "
                "of the declared allocation on the same true counts."
            )
        at = ", ".join(f"{g} at the table's rows ({t})" for g, t in pairs)
        return f"Measured: {at}; the table's levels above the rows are sums of them."

    def familywise(self) -> str:
        """ "familywise α = 0.05 over 8 tests" ("" when the store does not say)."""
        if not is_finite(self.alpha):
            return ""
        text = f"familywise α = {fmt_num(self.alpha, 3)}"
        if self.n_tests:
            text += f" over {self.n_tests} test{'s' if self.n_tests != 1 else ''}"
        return text

    def basis_words(self) -> str:
        return BASIS_WORDS.get(self.basis, self.basis)

    def short(self) -> str:
        """One line: "consistent at all 6 levels", "refuted at County; consistent at 7 levels"."""
        groups = self.by_verdict()
        if len(groups) == 1:
            ((verdict, cs),) = groups.items()
            return (
                f"{verdict} at all {_levels(len(cs))}"
                if len(cs) > 1
                else (f"{verdict} at {cs[0].level}")
            )
        if not groups:
            return NOT_JUDGED
        parts = []
        for verdict, cs in groups.items():
            names = [c.level for c in cs]
            parts.append(
                f"{verdict} at {', '.join(names)}"
                if verdict != CONSISTENT or len(names) <= 3
                else f"{verdict} at {_levels(len(names))}"
            )
        return "; ".join(parts)

    def headline(self) -> str:
        """ "Claim: refuted at County; consistent at 7 levels (familywise α = 0.05 over 8 tests;
        basis: …)." — a simulated release's basis says the claim holds by construction."""
        if not self.levels:
            return "Claim: not judged (the claims group holds no level)."
        basis = self.basis_words()
        if self.simulated:
            tail = [f"basis: {basis}, so the claim holds by construction"]
        else:
            tail = [t for t in (self.familywise(), f"basis: {basis}" if basis else "") if t]
        return f"Claim: {self.short()}" + (f" ({'; '.join(tail)})." if tail else ".")

    def sentences(self) -> list[str]:
        """The sentence of every level that is not consistent, the weightiest verdict first."""
        out = []
        for verdict, cs in self.by_verdict().items():
            if verdict == CONSISTENT:
                continue
            for c in (c for c in cs if c.sentence):
                text = c.sentence.removeprefix(f"{verdict}: ")  # the headline names the verdict
                text = f"At {c.level}, {text}" if text != c.sentence else text
                out.append(text if text.endswith(".") else text + ".")
        return out

    def summary(self) -> str:
        """The report's first-screen point: :meth:`headline`, then :meth:`sentences` verbatim."""
        return " ".join(t for t in [self.headline(), self.measured_at(), *self.sentences()] if t)

    def note(self) -> str:
        """The at-a-glance table's note: what the column judges and by which rule."""
        # at the headline δ, which the first screen states once (the group's ``delta``)
        text = "Claim: the verdict on the declared ε (the allocation's exact ε at the headline δ)"
        fw = "" if self.simulated else self.familywise()  # no test decides a simulated release
        text += f", {fw}" if fw else ""
        basis = self.basis_words()
        text += f"; basis: {basis}." if basis else "."
        if self.rule:
            text += f" Rule: {self.rule.rstrip('.')}."
        return text


def text_lines(claims: Claims, width: int = 80) -> list[str]:
    """The claim in plain lines of at most ``width`` columns (the CLI's): the headline, then each
    sentence of a level that is not consistent."""

    def wrap(text: str, indent: str) -> list[str]:
        return textwrap.wrap(
            text, width, initial_indent=indent, subsequent_indent="    ", break_on_hyphens=False
        )

    lines = wrap(claims.headline(), "")
    measured = claims.measured_at()
    if measured:
        lines += wrap(measured, "")
    for sentence in claims.sentences():
        lines += wrap(sentence, "  ")
    return lines


def _levels(n: int) -> str:
    return f"{n} level{'s' if n != 1 else ''}"


def _evidence(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (TypeError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def read_claims(ds: xr.Dataset | None) -> Claims | None:
    """The verdicts of a ``claims`` group, or ``None`` without one (or without verdicts)."""
    if ds is None or "claim_verdict" not in ds.variables or "geolevel" not in ds.coords:
        return None
    levels = str_values(ds["geolevel"].values)
    verdicts = str_values(ds["claim_verdict"].values)
    n = len(levels)
    sentences = (
        str_values(ds["claim_sentence"].values) if "claim_sentence" in ds.variables else [""] * n
    )
    evidence = (
        str_values(ds["claim_evidence"].values) if "claim_evidence" in ds.variables else [""] * n
    )
    attrs = ds.attrs

    def number(key: str) -> float:
        try:
            return float(attrs.get(key, math.nan))
        except (TypeError, ValueError):
            return math.nan

    n_tests = number("n_tests")
    return Claims(
        levels={
            g: LevelClaim(g, v.strip() or NOT_JUDGED, s.strip(), _evidence(e))
            for g, v, s, e in zip(levels, verdicts, sentences, evidence, strict=True)
        },
        alpha=number("alpha"),
        n_tests=int(n_tests) if math.isfinite(n_tests) and n_tests > 0 else None,
        basis=str(attrs.get("basis", "") or ""),
        delta=number("delta"),
        rule=str(attrs.get("rule", "") or ""),
    )


def evidence_words(c: LevelClaim) -> str:
    """The evidence of a level in a few words (the cell's hover): the test, its p-value against
    the per-test threshold, the interval on ε beside the declared ε."""
    e = c.evidence
    parts = []
    test = e.get("test")
    if test:
        parts.append(f"test: {test}")
    if is_finite(e.get("p_value")):
        p = f"p = {fmt_num(e['p_value'], 2)}"
        if is_finite(e.get("threshold")):
            p += f" (threshold {fmt_num(e['threshold'], 2)})"
        parts.append(p)
    interval = e.get("eps_interval")
    if isinstance(interval, list) and len(interval) == 2 and all(is_finite(x) for x in interval):
        parts.append(f"ε in [{fmt_num(interval[0], 3)}, {fmt_num(interval[1], 3)}]")
    if is_finite(e.get("declared_eps")):
        parts.append(f"declared ε {fmt_num(e['declared_eps'], 4)}")
    if e.get("measured_at"):
        parts.append(f"measured at {e['measured_at']}")
    if is_finite(e.get("n")):
        parts.append(f"n = {int(float(e['n'])):,}")
    return "; ".join(parts)
