"""Two audits side by side: :func:`compare` lines up, per geolevel (and all levels composed), the
Bureau's ε and the certified exact ε at one headline δ, the bias-aware EPL with its interval and the
MPL lower bound of two stores (the at-a-glance table's numbers, read by
:mod:`flows.report.compare_data`), and the EPL of every query both stores estimated; with the
differences B − A and B / A, what differs in the two specs, and the levels only one store holds;
and each store's claim verdict per level (:class:`ClaimRow`: ``changed`` when the verdicts differ).

Each row says whether its number moved:

* ``same`` — identical numbers (and intervals);
* ``changed`` — ε: any difference of the Bureau's ε, or certified brackets of the exact ε that do not
  overlap; EPL and MPL: the two intervals do not overlap;
* ``within bracket`` — the exact ε differs but the two certified brackets overlap;
* ``within noise`` — EPL or MPL differs but the two intervals overlap;
* ``no interval`` — an EPL or MPL differs and one side has no interval to judge it by;
* ``only in A`` / ``only in B`` — one store has no such number.

The ε are compared at store A's headline δ (``accounting.headline_delta`` of its spec); if the two
headline δ differ, the comparison says so and uses A's δ when store B holds it too, and refuses
(:class:`~auditlib.exceptions.InvalidParameterError`) when it does not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from auditlib.exceptions import InvalidParameterError
from flows.report.claims import NOT_JUDGED
from flows.report.compare_data import COMPOSED, AuditNumbers, Estimate
from flows.report.format import fmt_delta

#: the measures of a level's rows, in order, and their names in tables
MEASURES: dict[str, str] = {
    "bureau_eps": "Bureau ε",
    "exact_eps": "exact ε",
    "epl": "EPL",
    "mpl_lb": "MPL bound",
}
#: spec sections that set where and how a run goes, not its numbers: left out of the differences
IGNORED_SECTIONS = ("output", "cluster")
SAME, CHANGED = "same", "changed"
#: how notes and errors name the two stores
LABELS = ("store A", "store B")


@dataclass(frozen=True)
class Row:
    geolevel: str
    query: str  # "" on a level's rows (its headline EPL: see a.query, b.query)
    measure: str  # a key of MEASURES
    a: Estimate | None
    b: Estimate | None
    status: str

    @property
    def diff(self) -> float:
        if self.a is None or self.b is None:
            return math.nan
        return self.b.value - self.a.value

    @property
    def ratio(self) -> float:
        if self.a is None or self.b is None or self.a.value == 0:
            return math.nan
        return self.b.value / self.a.value


@dataclass(frozen=True)
class ClaimRow:
    """The claim verdict of a level in each store ("not judged": the store holds no verdicts)."""

    geolevel: str
    a: str
    b: str
    status: str  # same | changed | only in A | only in B
    a_sentence: str = ""
    b_sentence: str = ""


def claim_rows(a: AuditNumbers, b: AuditNumbers, levels: list[str]) -> list[ClaimRow]:
    """One row per level either store judged (none when neither holds verdicts)."""
    if not (a.has_claims or b.has_claims):
        return []
    rows = []
    for level in levels:
        va, vb = a.claims.get(level), b.claims.get(level)
        if va is None and vb is None:
            continue
        if va is None or vb is None:
            st = "only in B" if va is None else "only in A"
        else:
            st = SAME if va[0] == vb[0] else CHANGED
        rows.append(
            ClaimRow(
                level,
                va[0] if va else NOT_JUDGED,
                vb[0] if vb else NOT_JUDGED,
                st,
                va[1] if va else "",
                vb[1] if vb else "",
            )
        )
    return rows


@dataclass
class Comparison:
    a_path: str
    b_path: str
    a_run_id: str
    b_run_id: str
    delta: float | None  # the δ of the ε rows
    notes: list[str]
    spec_differences: list[tuple[str, str, str]]  # (dotted key, A's value, B's value)
    only_in_a: list[str]
    only_in_b: list[str]
    rows: list[Row]
    query_rows: list[Row] = field(default_factory=list)
    claim_rows: list[ClaimRow] = field(default_factory=list)
    epl_interval: str = ""
    mpl_alpha: float = math.nan

    @property
    def changed(self) -> list[Row]:
        """The rows whose number moved beyond its interval or bracket."""
        return [r for r in (*self.rows, *self.query_rows) if r.status == CHANGED]

    @property
    def changed_claims(self) -> list[ClaimRow]:
        """The levels whose claim verdict differs between the stores."""
        return [r for r in self.claim_rows if r.status == CHANGED]

    @property
    def no_change(self) -> bool:
        """Identical specs (but for where they write), levels, numbers and verdicts."""
        return (
            not (self.spec_differences or self.only_in_a or self.only_in_b)
            and all(r.status == SAME for r in (*self.rows, *self.query_rows))
            and all(r.status == SAME for r in self.claim_rows)
        )


def _overlap(a: Estimate, b: Estimate) -> bool | None:
    ends = (a.low, a.high, b.low, b.high)
    if not all(math.isfinite(x) for x in ends):
        return None
    return a.low <= b.high and b.low <= a.high


def status(measure: str, a: Estimate | None, b: Estimate | None) -> str:
    """Whether the number of a row moved between A and B (see the module's list)."""
    if a is None and b is None:
        return "—"
    if b is None:
        return "only in A"
    if a is None:
        return "only in B"
    if a.same_as(b):
        return SAME
    if measure == "bureau_eps":
        return CHANGED
    overlap = _overlap(a, b)
    if measure == "exact_eps":
        return CHANGED if overlap is False else "within bracket"
    if overlap is None:
        return "no interval"
    return "within noise" if overlap else CHANGED


def _delta_index(deltas: list[float], delta: float) -> int | None:
    for j, d in enumerate(deltas):
        if math.isclose(d, delta, rel_tol=1e-9):
            return j
    return None


def _delta_text(d: float | None) -> str:
    return fmt_delta(d) if d is not None and math.isfinite(d) and d > 0 else "—"


def common_delta(
    a: AuditNumbers,
    b: AuditNumbers,
    delta_of: Literal["a", "b"] = "a",
    labels: tuple[str, str] = LABELS,
) -> tuple[float | None, int | None, int | None, list[str]]:
    """(δ, its index in A, in B, notes): the headline δ of store ``delta_of`` (A by default), which
    the other store must hold too when both have accounting; ``labels`` name A and B."""
    ref, other = (a, b) if delta_of == "a" else (b, a)
    ref_name, other_name = labels if delta_of == "a" else (labels[1], labels[0])
    if ref.headline_delta is None:
        if other.headline_delta is None:
            return None, None, None, []
        note = f"{ref_name} holds no accounting: ε are not compared"
        return None, None, None, [note]
    delta = ref.headline_delta
    notes: list[str] = []
    j_other = None
    if other.has_accounting:
        j_other = _delta_index(other.deltas, delta)
        if j_other is None:
            held = ", ".join(fmt_delta(d) for d in other.deltas)
            raise InvalidParameterError(
                f"the headline δ differ: {ref_name} {ref.path!r} has δ = {fmt_delta(delta)}, "
                f"{other_name} {other.path!r} has δ = {_delta_text(other.headline_delta)} and no "
                f"accounting at {fmt_delta(delta)} (it holds δ = {held}); re-run it with "
                f"{fmt_delta(delta)} in accounting.deltas, or give the two stores the other way "
                "round"
            )
        if other.headline_delta is None or not math.isclose(
            other.headline_delta, delta, rel_tol=1e-9
        ):
            notes.append(
                f"the headline δ differ ({labels[0]}: {_delta_text(a.headline_delta)}, "
                f"{labels[1]}: {_delta_text(b.headline_delta)}); every ε is compared at "
                f"{ref_name}'s δ = {fmt_delta(delta)}, which both stores hold"
            )
    else:
        notes.append(f"{other_name} holds no accounting: ε are not compared")
    j_ref = _delta_index(ref.deltas, delta)
    j_a, j_b = (j_ref, j_other) if delta_of == "a" else (j_other, j_ref)
    return delta, j_a, j_b, notes


def _eps(n: AuditNumbers, level: str, j: int | None) -> tuple[Estimate | None, Estimate | None]:
    if j is None or level not in n.eps_bureau:
        return None, None
    lo, hi = float(n.eps_exact_lower[level][j]), float(n.eps_exact_upper[level][j])
    return Estimate(float(n.eps_bureau[level][j])), Estimate(hi, lo, hi)


def _flatten(spec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in spec.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not prefix:
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def _value_text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_value_text(v) for v in value) + "]"
    return repr(value)


def spec_differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(key, A's value, B's value) of every spec key whose value differs (sections of
    :data:`IGNORED_SECTIONS` left out), in A's order, then B's."""
    fa, fb = _flatten(a), _flatten(b)
    keys = list(fa) + [k for k in fb if k not in fa]
    return [
        (k, _value_text(fa.get(k)), _value_text(fb.get(k)))
        for k in keys
        if k.split(".")[0] not in IGNORED_SECTIONS and fa.get(k) != fb.get(k)
    ]


def _row(level: str, query: str, measure: str, a: Estimate | None, b: Estimate | None) -> Row:
    return Row(level, query, measure, a, b, status(measure, a, b))


def _level_rows(level: str, pairs: list[tuple[str, Estimate | None, Estimate | None]]) -> list[Row]:
    """The rows of a level: one per measure either store has."""
    return [_row(level, "", m, a, b) for m, a, b in pairs if a is not None or b is not None]


def compare(
    a: AuditNumbers,
    b: AuditNumbers,
    *,
    delta_of: Literal["a", "b"] = "a",
    labels: tuple[str, str] = LABELS,
) -> Comparison:
    """Line up the audits ``a`` and ``b`` (differences are B − A); the ε at the headline δ of
    store ``delta_of``; ``labels`` name A and B in the notes."""
    delta, j_a, j_b, notes = common_delta(a, b, delta_of, labels)
    both = [g for g in a.levels if g in b.levels]
    rows: list[Row] = []
    for level in [*both, COMPOSED]:
        bu_a, ex_a = _eps(a, level, j_a)
        bu_b, ex_b = _eps(b, level, j_b)
        pairs = [("bureau_eps", bu_a, bu_b), ("exact_eps", ex_a, ex_b)]
        pairs.append(("epl", a.epl.get(level), b.epl.get(level)))
        pairs.append(("mpl_lb", a.mpl.get(level), b.mpl.get(level)))
        rows += _level_rows(level, pairs)
    query_rows = [
        _row(level, query, "epl", a.epl_query[(level, query)], b.epl_query[(level, query)])
        for (level, query) in a.epl_query
        if (level, query) in b.epl_query
    ]
    for what, n in (("EPL", "has_epl"), ("MPL", "has_mpl")):
        for name, store in zip(labels, (a, b), strict=True):
            other = b if store is a else a
            if getattr(other, n) and not getattr(store, n):
                notes.append(f"{name} has no {what} results")
    if a.epl_interval and b.epl_interval and a.epl_interval != b.epl_interval:
        notes.append(
            f"the EPL intervals differ in kind ({labels[0]}: {a.epl_interval}, "
            f"{labels[1]}: {b.epl_interval})"
        )
    return Comparison(
        a_path=a.path,
        b_path=b.path,
        a_run_id=str(a.attrs.get("run_id", "—")),
        b_run_id=str(b.attrs.get("run_id", "—")),
        delta=delta,
        notes=notes,
        spec_differences=spec_differences(a.spec, b.spec),
        only_in_a=[g for g in a.levels if g not in b.levels],
        only_in_b=[g for g in b.levels if g not in a.levels],
        rows=rows,
        query_rows=query_rows,
        claim_rows=claim_rows(a, b, list(dict.fromkeys([*both, *a.claims, *b.claims]))),
        epl_interval=a.epl_interval or b.epl_interval,
        mpl_alpha=a.mpl_alpha if math.isfinite(a.mpl_alpha) else b.mpl_alpha,
    )
