"""The audit's claim verdicts: which residuals test which declared noise, the per-level task's
body (a published level's residuals streamed block by block through the scale and fit tests of
:mod:`auditlib.claims`), and the ``claims`` group (``storage/schema.py``).

A release whose noise dpaudit drew is consistent by construction at every accounted level. A
published (``observed``) release is tested at the declared geolevel measured at the table's rows
(:attr:`flows.spec.AuditSpec.observed_measured_as`): each published count column is matched to
the declared query of the same name, or to the level's one declared noise when all its queries
share it. The other declared levels hold no counts of their own: undecided.

A published release declared post-processed (``release.post_processing = "topdown"``) is tested
at every declared geolevel mapped onto a level of the table, against dpaudit's own TopDown of the
declared allocation on the same true counts (:mod:`auditlib.claims.two_sample`): one test per
level and size class of true counts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import xarray as xr

from auditlib import seeds
from auditlib.allocations import load_allocation
from auditlib.claims import (
    RULE,
    TESTS_PER_LEVEL,
    FitCounts,
    LawMoments,
    NoiseLaw,
    Verdict,
    by_construction,
    declared_epsilon,
    epsilon_interval,
    fit_test,
    fitted_factor,
    judge_published,
    not_published,
    scale_test,
)
from auditlib.claims.tradeoff_test import MAX_PER_PART, tradeoff_test
from auditlib.claims.two_sample import RULE as POST_PROCESSED_RULE
from auditlib.claims.two_sample import compare_sizes, judge_post_processed, size_class
from flows.spec import AuditSpec
from flows.spec.audit_plan import AuditPlan
from flows.spec.plan import make_plan
from flows.spec.sources import load_observed, observed_args
from storage import schema as S
from storage.result_store import ResultStore


@dataclasses.dataclass(frozen=True)
class PublishedLevel:
    """A declared geolevel tested on a published table's level: ``geolevel`` (the allocation's),
    ``table_level`` (its index in the plan), the residuals' ``query`` index, each count column's
    declared law (``None``: no declared query for it) and the level's accounting ``components``."""

    geolevel: str
    table_level: int
    query: int
    laws: tuple[NoiseLaw | None, ...]
    components: tuple[Any, ...]

    @property
    def testable(self) -> bool:
        return all(law is not None for law in self.laws)

    @property
    def declared_law(self) -> NoiseLaw | None:
        """The one law every published column carries (``None``: none, or several)."""
        laws = set(self.laws)
        return next(iter(laws)) if len(laws) == 1 else None


def published_levels(spec: AuditSpec, plan: AuditPlan) -> list[PublishedLevel]:
    """The declared geolevels an observed release's residuals test (see the module docstring)."""
    a = spec.audit
    alloc = load_allocation(a.allocation)
    counts = list(spec.population.counts)
    # the rows' cells: "total" when the table has one count column, else the "detailed" cells
    query = plan.queries.index("total" if len(counts) == 1 else "detailed")
    out = []
    pp = post_processed(spec)  # its residuals are not the noise: no law per column
    for g, table_level in spec.observed_measured_as.items():
        comps = tuple(alloc.accounting_components(a.neighbours, a.universe, a.region, g))
        if pp:
            out.append(PublishedLevel(g, plan.geolevels.index(table_level), query, (), comps))
            continue
        qs = alloc.select(a.universe, a.region, g)
        noise = {q.query: NoiseLaw.of(q.noise_variance(a.neighbours)) for q in qs}
        shared = set(noise.values())
        laws = tuple(noise.get(c, next(iter(shared)) if len(shared) == 1 else None) for c in counts)
        out.append(PublishedLevel(g, plan.geolevels.index(table_level), query, laws, comps))
    return out


def post_processed(spec: AuditSpec) -> bool:
    """A published release declared post-processed: tested against a reference release."""
    return spec.release.kind == "observed" and spec.release.post_processing != "none"


def tests_run(spec: AuditSpec, plan: AuditPlan, levels: list[PublishedLevel]) -> int:
    """m: the tests the published levels get (each at α/m): three per level of a release
    declared raw, one per level and size class of true counts of one declared post-processed."""
    if post_processed(spec):
        return sum(len(np.unique(size_class(_truth(spec, plan, lv)))) for lv in levels)
    return TESTS_PER_LEVEL * sum(1 for lv in levels if lv.testable)


def reference_plan(spec: AuditSpec, plan: AuditPlan) -> AuditPlan:
    """The release a post-processed declaration names (:meth:`AuditSpec.reference_spec`), its
    noise drawn from its own stream of the run's seed (``seeds.CLAIM_REFERENCE``)."""
    ref = make_plan(spec.reference_spec())
    key = seeds.seed_sequence(plan.noise_seed, seeds.CLAIM_REFERENCE)
    return dataclasses.replace(ref, noise_seed=int(key.generate_state(1, dtype="uint64")[0]))


def _level(plan: AuditPlan, table_level: int) -> str | None:
    return plan.geolevels[table_level] if table_level else None  # 0: the root


def _truth(spec: AuditSpec, plan: AuditPlan, level: PublishedLevel) -> np.ndarray:
    """The true counts of the level's cells (units × cells, flattened)."""
    obs = load_observed(*observed_args(spec))
    return np.asarray(obs.level_truth(_level(plan, level.table_level))).ravel()


def judge_post_processed_levels(
    spec: AuditSpec,
    plan: AuditPlan,
    levels: list[PublishedLevel],
    *,
    delta: float,
    threshold: float,
) -> list[dict[str, Any]]:
    """The verdicts (as dicts of :class:`~auditlib.claims.Verdict`'s fields) of the levels of a
    release declared post-processed: each level's published cells against the same cells of
    :func:`reference_plan`'s runs, by size class of true counts."""
    from flows.audit.blocks import topdown_histograms

    ref = reference_plan(spec, plan)
    hists = topdown_histograms(ref, ref.blocks[0])  # the table's one run, every level
    obs = load_observed(*observed_args(spec))
    out = []
    for lv in levels:
        level = _level(plan, lv.table_level)
        truth = np.asarray(obs.level_truth(level))
        published = np.asarray(obs.level_published(level)) - truth[None]
        ref_truth, ref_dp = hists[lv.table_level]
        runs = ref_dp.shape[0]
        comparisons = compare_sizes(
            published.reshape(published.shape[0], -1),
            truth.ravel(),
            (ref_dp - ref_truth[None]).reshape(runs, -1),
            ref_truth.ravel(),
            threshold=threshold,
        )
        verdict = judge_post_processed(
            lv.geolevel,
            comparisons,
            threshold=threshold,
            declared_eps=declared_epsilon(lv.components, delta),
            delta=delta,
            measured_at=plan.geolevels[lv.table_level],
            post_processing=spec.release.post_processing,
        )
        out.append(dataclasses.asdict(verdict))
    return out


def judge_level(
    store: ResultStore,
    plan: AuditPlan,
    level: PublishedLevel,
    *,
    delta: float,
    threshold: float,
) -> dict[str, Any]:
    """The verdict on one published level at the headline ``delta`` (as a dict of
    :class:`~auditlib.claims.Verdict`'s fields), its residuals read block by block twice: moments,
    then the fit at each law's scale. The declared ε is the certified accountant's upper end."""
    name = plan.geolevels[level.table_level]
    declared_eps = epsilon_interval(level.components, delta, 1.0, 1.0)[1]
    if not level.testable:
        counts = plan.strategy.published_columns(plan)
        cols = ", ".join(c for c, law in zip(counts, level.laws, strict=True) if law is None)
        return dataclasses.asdict(
            Verdict(
                level.geolevel,
                "undecided",
                f"undecided: the declared {level.geolevel} queries do not say which noise the "
                f"published column(s) {cols} carry; name a declared query after each column",
                {"test": "none", "declared_eps": declared_eps, "delta": delta},
            )
        )
    moments = {law: LawMoments(law) for law in set(level.laws) if law is not None}
    for r, law in _residuals(store, plan, level):
        moments[law].add(r)
    scale = scale_test(list(moments.values()), 1.0 - threshold)
    factors = {law: fitted_factor(m) for law, m in moments.items()}
    key = seeds.seed_sequence(plan.noise_seed, seeds.CLAIM_FIT, level.table_level)
    rng = np.random.Generator(np.random.PCG64(key))
    fit = FitCounts()
    kept: dict[NoiseLaw, list[np.ndarray]] = {law: [] for law in moments}
    room = {law: 4 * MAX_PER_PART for law in moments}  # the trade-off test's draws, kept
    for r, law in _residuals(store, plan, level):
        fit.add(r, law.scaled(factors[law]), rng)
        if room[law] > 0:
            part = np.asarray(r, dtype=np.float64).ravel()[: room[law]]
            kept[law].append(part)
            room[law] -= part.size
    pairs = [(law, a) for law, parts in kept.items() for a in parts]
    verdict = judge_published(
        level.geolevel,
        scale=scale,
        fit=fit_test(fit),
        eps_interval=epsilon_interval(level.components, delta, scale.k_low, scale.k_high),
        declared_eps=declared_eps,
        delta=delta,
        threshold=threshold,
        measured_at=name,
        laws=sorted({law.describe() for law in moments}),
        tradeoff=tradeoff_test(pairs, conf=1.0 - threshold, delta=delta, rng=rng),
    )
    return dataclasses.asdict(verdict)


def _residuals(store: ResultStore, plan: AuditPlan, level: PublishedLevel) -> Any:
    """(residuals, law) of each count column in each block of the level, block by block."""
    for b in plan.blocks_at(level.table_level):
        r, q = store.read_residuals(b.state, b.level)
        cells = store.read_cells(b.state, b.level)
        for c, law in enumerate(level.laws):
            sel = (q == level.query) & (cells == c)
            if sel.any() and law is not None:
                yield r[:, sel], law


def claims_dataset(
    spec: AuditSpec,
    accounting: xr.Dataset,
    published: dict[str, dict[str, Any]] | None,
    n_tests: int,
) -> xr.Dataset:
    """The ``claims`` group over the accounting group's geolevels: ``published`` maps a tested
    geolevel to its verdict's fields (``None``: a simulated release, consistent by construction)."""
    delta = spec.accounting.headline_delta
    eps = accounting.eps_exact_upper.sel({S.DELTA: delta}, method="nearest")
    verdicts = []
    for g in (str(x) for x in accounting[S.GEOLEVEL].values):
        declared = float(eps.sel({S.GEOLEVEL: g}))
        if published is None:
            verdicts.append(by_construction(g, declared, delta, spec.release.kind))
        elif g in published:
            verdicts.append(Verdict(**published[g]))
        else:
            pp = post_processed(spec)
            verdicts.append(not_published(g, declared, delta, post_processed=pp))
    gl = S.GEOLEVEL
    return xr.Dataset(
        {
            "claim_verdict": ((gl,), np.array([v.verdict for v in verdicts], dtype=object)),
            "claim_evidence": ((gl,), np.array([v.evidence_json() for v in verdicts], object)),
            "claim_sentence": ((gl,), np.array([v.sentence for v in verdicts], dtype=object)),
        },
        coords={gl: np.array([v.geolevel for v in verdicts], dtype=object)},
        attrs={
            "alpha": spec.accounting.claim_alpha,
            "n_tests": n_tests,
            "basis": "simulated" if published is None else "observed",
            "delta": delta,
            "rule": POST_PROCESSED_RULE if post_processed(spec) else RULE,
        },
    )
