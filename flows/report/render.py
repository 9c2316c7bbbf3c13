"""Render one self-contained HTML audit report from a dpaudit result store: :func:`render_report`.

The report is built from the Zarr v3 result store alone (no re-computation, no access to the
audit inputs): run metadata from the root attributes, the ``accounting`` group (exact ε(δ)
brackets against the Bureau's and the Canonne–Kamath–Steinke conversions), the ``epl`` group
(empirical privacy loss after Flaxman & Petti), the ``residuals`` group (DP − truth samples), the
``accuracy`` and ``mpl`` groups and an ``mpl_coverage`` or ``fdp_coverage`` group. Groups that are absent are reported
as absent; the sections that exist are rendered.

This module opens the store (:mod:`flows.report.store_data`), builds each section (one module per
section: :mod:`~flows.report.summary`, :mod:`~flows.report.accounting`,
:mod:`~flows.report.accuracy`, :mod:`~flows.report.epl`, :mod:`~flows.report.residuals`,
:mod:`~flows.report.mpl`, :mod:`~flows.report.coverage`, :mod:`~flows.report.fdp_coverage`), the header and the opening summary, and
writes the page (:mod:`flows.report.page`).

Figures are drawn with matplotlib's Agg canvas on :class:`matplotlib.figure.Figure` objects that
are never registered with pyplot, so rendering is headless, thread-safe and leaks no figures, and
the process-wide backend of the caller is left untouched. Every figure is embedded as a base64
PNG; the page has inline CSS and no external resources. Its progress, section by section, goes
to :mod:`flows.runtime.progress` (the CLI's bar).
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np
import xarray as xr

from flows.report.accounting import accounting_section
from flows.report.accuracy import AccuracySection, accuracy_section
from flows.report.claims import read_claims
from flows.report.coverage import mpl_coverage_section
from flows.report.epl import EplSection, epl_section
from flows.report.error_bars import allocation_of, error_bars_section, open_error_bars
from flows.report.fdp_coverage import fdp_coverage_section
from flows.report.header import audit_header, coverage_header
from flows.report.mpl import mpl_section
from flows.report.page import atomic_write_text, render_page
from flows.report.parallel import available, beside
from flows.report.release import open_production, production_note
from flows.report.release_basis import ReleaseBasis, release_basis
from flows.report.residuals import residual_section
from flows.report.store_data import (
    CLAIMS_GROUP,
    COVERAGE_GROUP,
    FDP_COVERAGE_GROUP,
    GROUP_DESCRIPTIONS,
    GROUPS,
    StoreLike,
    epl_interval_label,
    headline_delta,
    open_store,
    provenance,
    replicates,
    store_arg,
    str_values,
)
from flows.report.summary import summary_section
from flows.runtime import progress

__all__ = ["render_report"]


def render_report(
    store: StoreLike,
    output: str | os.PathLike[str],
    *,
    storage_options: dict[str, Any] | None = None,
    compare_with: StoreLike | None = None,
    parallel: bool | None = None,
) -> pathlib.Path:
    """Render the HTML audit report of the result ``store`` to ``output``.

    ``store`` is a :class:`~storage.result_store.ResultStore` (the CLI's, opened once), or a
    local path or an fsspec URI of a consolidated Zarr v3 result store; ``storage_options`` are
    passed to fsspec for a path or URI. The output is written atomically (a
    temporary file beside it, then :func:`os.replace`). Returns the output path.

    ``compare_with``, another audit store (read with the same ``storage_options``), adds the
    section "Compared with" (:mod:`flows.report.compare_section`): its numbers beside this store's.

    ``parallel`` (default: where :func:`flows.report.parallel.available`) draws the EPL and
    accuracy sections in a forked second process while this one draws the others (:mod:`flows.report.parallel`);
    the page is the same byte for byte either way.

    Raises :class:`FileNotFoundError` if ``store`` holds neither root attributes nor any of
    the result groups.
    """
    rs = store_arg(store, storage_options)
    store_s = rs.shown  # the store as given: its name and the CSV beside it
    out = pathlib.Path(output)
    _step(0, "reading the store")
    root_attrs, groups = open_store(rs)
    store_name = pathlib.PurePosixPath(store_s.rstrip("/")).name or store_s

    attrs: dict[str, Any] = {}
    summary_ds = groups.pop("summary")
    coverage_ds = groups.pop(COVERAGE_GROUP)
    fdp_ds = groups.pop(FDP_COVERAGE_GROUP)
    claims_ds = groups.pop(CLAIMS_GROUP)
    if summary_ds is not None:
        attrs.update(summary_ds.attrs)
    attrs.update(root_attrs or {})

    acc, epl, res = groups["accounting"], groups["epl"], groups["residuals"]
    accuracy_ds, mpl_ds = groups["accuracy"], groups["mpl"]
    n_rep = replicates(attrs, res)
    hd = headline_delta(acc)
    basis = release_basis(attrs, epl)
    if parallel is None:
        parallel = available()
    pending = None
    try:
        claims = read_claims(claims_ds)
        audited = str_values(epl["geolevel"].values) if epl is not None else None
        if epl is not None or accuracy_ds is not None:  # half of the drawing, beside the rest
            if parallel:  # the child reads nothing from the store: its groups in memory
                for ds in (epl, accuracy_ds):
                    if ds is not None:
                        ds.load()
            pending = beside(
                _epl_and_accuracy,
                epl,
                accuracy_ds,
                n_rep,
                basis,
                exact_eps(acc, hd),
                parallel=parallel,
            )
        _step(1, "accounting figures")
        accounting = accounting_section(acc, attrs, audited) if acc is not None else None
        epl_ci, epl_floor_q, epl_ba = epl_interval_label(epl)
        _step(2, "residual figures")
        residuals = residual_section(res, epl) if res is not None else None
        table = summary_section({**attrs, **(root_attrs or {})}, acc, epl, mpl_ds, n_rep, claims)
        _step(3, "MPL figures")
        mpl = mpl_section(mpl_ds) if mpl_ds is not None else None
        coverage = mpl_coverage_section(coverage_ds) if coverage_ds is not None else None
        fdp_coverage = fdp_coverage_section(fdp_ds) if fdp_ds is not None else None
        # what a coverage store holds, for its header (read before the groups are closed)
        coverage_meta_of = (
            _loaded(coverage_ds) if coverage_ds is not None else None,
            _loaded(fdp_ds) if fdp_ds is not None else None,
        )
        _step(4, "EPL and accuracy figures")
        epl_sec, accuracy = pending.result() if pending is not None else (None, None)
        pending = None
    finally:
        if pending is not None:  # failed before the second process's sections were asked for
            pending.cancel()
        for ds in (acc, epl, res, summary_ds, accuracy_ds, mpl_ds, coverage_ds, fdp_ds, claims_ds):
            if ds is not None:
                ds.close()

    comparison = None
    if compare_with is not None:
        from flows.report.compare_data import audit_numbers
        from flows.report.compare_section import compare_section

        this = audit_numbers(rs)
        comparison = compare_section(this, store_arg(compare_with, rs.storage_options))

    # a store of ``dpaudit mpl-coverage`` or ``fdp-coverage`` holds no audit group: render its
    # coverage alone
    coverage_only = (coverage is not None or fdp_coverage is not None) and all(
        groups[g] is None for g in GROUPS
    )
    missing = (
        [] if coverage_only else [(g, GROUP_DESCRIPTIONS[g]) for g in GROUPS if groups[g] is None]
    )
    summary_parts = []
    if coverage_only and coverage is not None:
        summary_parts.append(
            "This store was written by dpaudit mpl-coverage: it checks the maximum privacy loss "
            "lower bound on mechanisms whose loss is known, and holds no audit of a release."
        )
    if coverage_only and fdp_coverage is not None:
        summary_parts.append(
            "This store was written by dpaudit fdp-coverage: it checks the empirical f-DP "
            "points on mechanisms whose trade-off curve is known, and holds no audit of a release."
        )
    if claims is not None:
        summary_parts.append(claims.summary())
    if accounting is not None and accounting.summary:
        summary_parts.append(accounting.summary)
    if epl_sec is not None:
        summary_parts.extend(epl_sec.summary)
    # the groups a store lacks are listed once, under the summary (``missing``)

    # a published table's error bars: their section alone, no audit group is missing
    error_bars = error_bars_section(open_error_bars(rs), store_s, out)
    if error_bars is not None:
        missing, summary_parts = [], [error_bars.summary()]
    production = open_production(rs)
    note = production_note(production)
    if note is not None:
        summary_parts.append(note)
    header = (
        coverage_header(attrs, coverage_meta_of[0], coverage_meta_of[1], store_name)
        if coverage_only
        else audit_header(attrs, acc, n_rep, hd, basis)
    )
    if error_bars is not None:  # the allocation TopDown reran (no accounting of it is stored)
        header["allocation_id"] = allocation_of(attrs)

    _step(5, "writing the page")
    html = render_page(
        header=header,
        summary=summary_parts,
        accounting=accounting,
        epl=epl_sec,
        residuals=residuals,
        table=table,
        comparison=comparison,
        accuracy=accuracy,
        mpl=mpl,
        coverage=coverage,
        fdp_coverage=fdp_coverage,
        coverage_only=coverage_only,
        epl_ci=epl_ci,
        epl_floor_q=epl_floor_q,
        epl_ba=epl_ba,
        missing=missing,
        provenance=provenance(attrs),
        store_name=store_name,
        simulated=basis.simulated,
        error_bars=error_bars,
    )
    atomic_write_text(out, html)
    _step(_STEPS, "written")
    return out


#: the steps of a report whose progress :func:`render_report` reports (:mod:`flows.runtime.progress`)
_STEPS = 6


def _step(done: int, what: str) -> None:
    progress.report(done, _STEPS, f"report: {what}")


def exact_eps(acc: Any, hd: tuple[int, float] | None) -> dict[str, float]:
    """Each level's exact ε (the certified upper end) at the headline δ; {} without one."""
    if acc is None or hd is None or "eps_exact_upper" not in acc.variables:
        return {}
    upper = np.asarray(acc["eps_exact_upper"].values, dtype=np.float64)[:, hd[0]]
    return dict(zip(str_values(acc["geolevel"].values), map(float, upper), strict=True))


def _epl_and_accuracy(
    epl: xr.Dataset | None,
    accuracy_ds: xr.Dataset | None,
    n_rep: int | None,
    basis: ReleaseBasis,
    eps: dict[str, float],
) -> tuple[EplSection | None, AccuracySection | None]:
    """The EPL and accuracy sections (≈ half of the drawing: what :func:`render_report` draws in
    its second process)."""
    epl_sec = epl_section(epl, n_rep, basis, eps) if epl is not None else None
    accuracy = accuracy_section(accuracy_ds) if accuracy_ds is not None else None
    return epl_sec, accuracy


def _loaded(ds: Any) -> Any:
    """A coverage group's coordinates and attributes (no data variables), in memory."""
    return ds.drop_vars(list(ds.data_vars)).load()
