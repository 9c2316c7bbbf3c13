"""Prefect artifacts of a finished run: what a person watching the Prefect UI reads on its run page.

An audit gets the at-a-glance table of its report (per level: the Bureau's ε, the exact ε, the
bias-aware EPL with its interval, floor and status, the MPL bound and the claim verdict, at the
headline δ; built by :func:`flows.report.summary.summary_section`) — its description says the
claim and how the EPL statuses read (a simulated release's are no warning: its noise is the
claimed noise) — the store's location with its ``verify`` status, and a link to its report; ``sweep``, ``mpl-coverage``, ``fdp-coverage`` and ``direct`` get their own
summary table.

Keys are ``<kind>-<run id>-<what>`` (the run id: a hash of what sets the numbers), so the same spec
run again (a deployment's nightly schedule) adds a version to the same artifact and the UI shows its
history. Building is pure (:class:`Artifact` values from a store); :func:`publish` sends them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import numpy as np

if TYPE_CHECKING:
    from flows.report.store_data import StoreLike
    from storage.result_store import ResultStore

#: Prefect's rule for artifact keys
KEY_RULE = re.compile(r"^[a-z0-9-]+$")


@dataclass(frozen=True)
class Artifact:
    key: str
    type: str  # "table" | "markdown" (a link is markdown, as Prefect's own link artifacts)
    data: str  # a table: JSON list of rows; markdown: the text
    description: str


def artifact_key(kind: str, run_id: str, what: str) -> str:
    """``<kind>-<run id>-<what>``, checked against Prefect's rule (lowercase, digits, dashes)."""
    key = f"{kind}-{run_id}-{what}".lower()
    if not KEY_RULE.match(key):
        raise ValueError(f"artifact key {key!r} is not lowercase letters, digits and dashes")
    return key


def _table(key: str, rows: list[dict[str, str]], description: str) -> Artifact:
    return Artifact(key, "table", json.dumps(rows, ensure_ascii=False), description)


# --- an audit ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Glance:
    """The at-a-glance rows of a store, the δ they are at, and what its description says."""

    rows: list[dict[str, str]]
    delta: str
    simulated: bool = True
    claim: str = ""  # the claim in one line ("" without a claims group)


def at_a_glance(store: StoreLike) -> Glance:
    """The report's at-a-glance table of ``store`` (a ResultStore or its URL: the summary
    section's rows, same cells, and the claim verdict per level: "not judged" in a store without
    verdicts)."""
    from flows.report.claims import read_claims
    from flows.report.release_basis import release_basis
    from flows.report.store_data import CLAIMS_GROUP, open_store, replicates
    from flows.report.summary import summary_section

    root, groups = open_store(store)
    attrs = {**(groups["summary"].attrs if groups["summary"] is not None else {}), **(root or {})}
    try:
        claims = read_claims(groups[CLAIMS_GROUP])
        basis = release_basis(attrs, groups["epl"])
        section = summary_section(
            attrs,
            groups["accounting"],
            groups["epl"],
            groups["mpl"],
            replicates(attrs, groups["residuals"]),
            claims,
        )
    finally:
        for ds in groups.values():
            if ds is not None:
                ds.close()
    claim = claims.headline().removeprefix("Claim: ").rstrip(".") if claims is not None else ""
    if section is None:
        return Glance([], "—", basis.simulated, claim)
    rows = [
        {
            "level": r["geolevel"],
            "Bureau ε": r["bureau"],
            "exact ε": r["exact"],
            "EPL (interval)": r["epl"],
            "EPL floor": r["epl_floor"],
            "EPL status": r["epl_flag"] or "—",
            "MPL bound": r["mpl"],
            # a level's verdict; one not consistent with its sentence
            "claim": f"{r['claim']}: {r['claim_sentence']}" if r["claim_sentence"] else r["claim"],
        }
        for r in section.rows
    ]
    return Glance(rows, section.delta, basis.simulated, claim)


def at_a_glance_rows(store: StoreLike) -> tuple[list[dict[str, str]], str]:
    """The at-a-glance rows of ``store`` and the δ they are at ("—" when the store has no
    accounting)."""
    g = at_a_glance(store)
    return g.rows, g.delta


def epl_verdict(rows: list[dict[str, str]], simulated: bool = True) -> str:
    """One line on the EPL statuses: how many levels are above their floor or unresolved — for a
    simulated release (its noise is the claimed noise) post-processing and estimator effects,
    never loss; for a published one the claim verdict judges."""
    from flows.report.epl_headline import flag_class

    flags = [r["EPL status"] for r in rows if r["EPL status"] not in ("—", "")]
    if not flags:
        return "no EPL status"
    off = [f for f in flags if flag_class(f, simulated=simulated) in ("warn", "info")]
    if not off:
        return f"EPL: all {len(flags)} levels within their floor and resolved"
    text = f"EPL: {len(off)} of {len(flags)} levels above their floor or not resolved"
    if simulated:
        return text + " (simulated release: post-processing and estimator effects, not loss)"
    return text + " (the claim verdict judges the claim)"


def glance_description(g: Glance) -> str:
    """The at-a-glance artifact's description: the δ, the claim, the EPL statuses."""
    parts = [f"at a glance, at the headline δ = {g.delta} (accounting.headline_delta)"]
    parts.append(f"claim: {g.claim}" if g.claim else "claim: not judged")
    parts.append(epl_verdict(g.rows, g.simulated))
    return "; ".join(parts)


def store_markdown(url: str, problems: list[str], arrays: int, blocks: int) -> str:
    """The store's location and its ``dpaudit verify`` status, in markdown."""
    lines = ["### Result store", "", f"`{url}`", ""]
    if problems:
        lines.append(f"**verify: FAILED** ({len(problems)} problem(s)):")
        lines += ["", *[f"- {p}" for p in problems[:20]]]
        if len(problems) > 20:
            lines.append(f"- … and {len(problems) - 20} more")
    else:
        lines.append(f"**verify: ok** — {arrays} arrays and {blocks} blocks match their checksums")
    lines += ["", f"Check it again with `dpaudit verify {url}`."]
    return "\n".join(lines)


def verified_store(kind: str, run_id: str, store: ResultStore) -> Artifact:
    """The store artifact, with ``verify`` run on the store now."""
    from auditlib.exceptions import DPAuditError
    from storage import checksums

    url = store.url  # absolute: a relative path means nothing on the run page
    try:
        v = checksums.verify(url, store.storage_options)
        problems, arrays, blocks = list(v.problems), v.arrays, v.blocks
    except DPAuditError as exc:
        problems, arrays, blocks = [str(exc)], 0, 0
    status = "FAILED" if problems else "ok"
    return Artifact(
        artifact_key(kind, run_id, "store"),
        "markdown",
        store_markdown(url, problems, arrays, blocks),
        f"where the results are, and `dpaudit verify`: {status}",
    )


def report_link(kind: str, run_id: str, report: str, served_at: str = "") -> Artifact:
    """The HTML report: a link a browser follows from the Prefect UI — the report's URL as given,
    or its file name under ``served_at`` (``output.report_url``: where its directory is served) —
    else its path on the machine that ran the audit and how to open it there (a browser does not
    follow a ``file://`` link from a web page)."""
    key, what = artifact_key(kind, run_id, "report"), "the HTML report of this run"
    if re.match(r"^[a-z][a-z0-9+.-]*://", report):
        return Artifact(key, "markdown", f"[{report}]({report})", what)
    path = Path(report).resolve()
    if served_at:
        link = served_at.rstrip("/") + "/" + quote(path.name)
        return Artifact(key, "markdown", f"[{path.name}]({link}) (the file `{path}`)", what)
    text = (
        f"The report is the file `{path}` on the machine that ran the audit. A browser does not "
        "open a file link from this page: open the file there, or serve its directory "
        f"(`python3 -m http.server 8000 --bind 127.0.0.1 --directory {path.parent}`) and set "
        '`output.report_url = "http://127.0.0.1:8000/"` so that this artifact links to it.'
    )
    return Artifact(key, "markdown", text, what + " (its path: not served)")


def audit_artifacts(
    store: ResultStore, run_id: str, report: str | None, served_at: str = ""
) -> list[Artifact]:
    """The at-a-glance table, the store (with ``verify``) and, if one was written, the report."""
    glance = at_a_glance(store)
    out = [
        _table(
            artifact_key("audit", run_id, "at-a-glance"),
            glance.rows,
            glance_description(glance),
        ),
        verified_store("audit", run_id, store),
    ]
    if report:
        out.append(report_link("audit", run_id, report, served_at))
    return out


# --- sweep, mpl-coverage, direct ---------------------------------------------------------------


def _num(x: Any, digits: int = 4) -> str:
    from flows.report.format import fmt_num

    v = float(x)
    return fmt_num(v, digits) if math.isfinite(v) else "—"


def sweep_rows(ds: Any, headline_delta: float = 1e-10) -> tuple[list[dict[str, str]], float]:
    """Per job of an ``accounting_sweep`` group: ρ, the Bureau's and the exact ε at one δ (the
    spec's default headline δ if swept, else the smallest)."""
    from flows.report.format import fmt_bracket

    deltas = [float(d) for d in np.asarray(ds["delta"].values)]
    j = deltas.index(headline_delta) if headline_delta in deltas else int(np.argmin(deltas))
    rows = []
    for i in range(ds.sizes["job"]):
        rows.append(
            {
                "allocation": str(ds["allocation"].values[i]),
                "universe": str(ds["universe"].values[i]),
                "region": str(ds["region"].values[i]),
                "neighbours": str(ds["neighbours"].values[i]),
                "level": str(ds["geolevel"].values[i]),
                "ρ": _num(ds["rho"].values[i], 5),
                "Bureau ε": _num(ds["eps_bureau"].values[i, j], 5),
                "exact ε": fmt_bracket(
                    float(ds["eps_exact_lower"].values[i, j]),
                    float(ds["eps_exact_upper"].values[i, j]),
                ),
            }
        )
    return rows, deltas[j]


def coverage_rows(ds: Any) -> list[dict[str, str]]:
    """Per mechanism × claimed ε₀ of an ``mpl_coverage`` group: ε*_C, coverage, share above the
    claim, median bound (the columns ``dpaudit mpl-coverage`` prints; a bound ≤ 0: vacuous)."""
    from flows.report.mpl_bound import fmt_lb

    rows = []
    for m in ds["mechanism"].values:
        for e0 in ds["epsilon0"].values:
            c = ds.sel(mechanism=m, epsilon0=e0)
            lb = np.asarray(c["lb"].values if "lb" in c else [], dtype=float)
            lb = lb[np.isfinite(lb)]
            rows.append(
                {
                    "mechanism": str(m),
                    "ε₀": _num(e0, 3),
                    "ε*_C": _num(c["epsilon_c"].values, 4),
                    "coverage": _num(c["coverage"].values, 3),
                    "LB > claim": _num(c["exceeds_claim"].values, 3),
                    "median LB": fmt_lb(float(np.median(lb)), 4) if lb.size else "—",
                }
            )
    return rows


def fdp_coverage_rows(ds: Any) -> list[dict[str, str]]:
    """Per mechanism × parameter × band of an ``fdp_coverage`` group: coverage, the plug-in
    points' coverage, the median μ lower bound beside the true μ, the share refuting the claim
    (the columns ``dpaudit fdp-coverage`` prints)."""
    rows = []
    for m in ds["mechanism"].values:
        for p in ds["parameter"].values:
            c = ds.sel(mechanism=m, parameter=p)
            for b in ds["band"].values:
                cb = c.sel(band=b)
                rows.append(
                    {
                        "mechanism": str(m),
                        "parameter": _num(p, 3),
                        "band": str(b),
                        "coverage": _num(cb["coverage"].values, 3),
                        "plug-in coverage": _num(cb["plugin_coverage"].values, 3),
                        "median μ_lb": _num(cb["median_mu_lower"].values, 3),
                        "μ": _num(c["mu"].values, 3),
                        "refuted": _num(cb["detection"].values, 3),
                    }
                )
    return rows


def direct_rows(ds: Any) -> list[dict[str, str]]:
    """Per event kind of a ``direct`` group: events kept, max |log-ratio|, the lower bound and the
    known ε (the columns ``dpaudit direct`` prints; a vacuous bound reads "0 (vacuous)")."""
    from flows.report.mpl_bound import fmt_lb

    eps = ds.attrs.get("epsilon")
    return [
        {
            "events": ev,
            "kept": str(ds.sizes[f"k_{ev}"]),
            "max |log-ratio|": _num(ds.attrs[f"epl_{ev}"]),
            "lower bound": fmt_lb(ds.attrs[f"epl_lower_{ev}"]),  # ≤ 0: "0 (vacuous)"
            "known ε": _num(eps) if eps is not None else "—",
        }
        for ev in ("eq", "ge")
    ]


def experiment_artifacts(kind: str, run_id: str, store: ResultStore, group: str) -> list[Artifact]:
    """The summary table of a ``sweep`` / ``mpl-coverage`` / ``fdp-coverage`` / ``direct`` store and the store itself."""
    ds = store.open_group(group)
    try:
        if kind == "sweep":
            rows, delta = sweep_rows(ds)
            what = f"the Bureau's and the exact ε of every job at δ = {delta:g}"
        elif kind == "mpl-coverage":
            rows, what = coverage_rows(ds), "MPL lower-bound coverage per mechanism and ε₀"
        elif kind == "fdp-coverage":
            rows = fdp_coverage_rows(ds)
            what = "coverage of the empirical f-DP points per mechanism, parameter and band"
        elif kind == "direct":
            rows, what = direct_rows(ds), "the direct EPL estimate and its lower bound"
        else:
            raise ValueError(f"unknown experiment kind {kind!r}")
    finally:
        ds.close()
    return [
        _table(artifact_key(kind, run_id, "summary"), rows, what),
        verified_store(kind, run_id, store),
    ]


# --- Prefect -----------------------------------------------------------------------------------


def publish(artifacts: list[Artifact], flow_run_id: str | None = None) -> None:
    """Create the artifacts on the Prefect API, on ``flow_run_id`` (default: the running flow)."""
    from uuid import UUID

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import ArtifactCreate

    if flow_run_id is None:
        from prefect.runtime import flow_run

        flow_run_id = flow_run.id
    with get_client(sync_client=True) as client:
        for a in artifacts:
            client.create_artifact(
                ArtifactCreate(
                    key=a.key,
                    type=a.type,
                    data=a.data,
                    description=a.description,
                    flow_run_id=UUID(str(flow_run_id)) if flow_run_id else None,
                )
            )
