"""The single-file HTML report, rendered from a result store alone: :func:`render_report`.

Modules, each named for what it holds:

* ``render`` — :func:`render_report`: opens the store, builds the sections, writes the page;
* ``store_data`` — reading the store: groups, root attributes, string values, EPL knobs,
  provenance;
* ``format`` — number formatting: significant digits, brackets of ε rounded outwards, per cent;
* ``page`` — the Jinja template rendered to HTML and its atomic write;
* ``claims`` — the claim verdict per level (the ``claims`` group) and its words on every face;
* ``release_basis`` — a simulated or a published release, and what that makes of its EPL
  (TopDown's post-processing bias, what dominates an estimate beyond 10⁵ replicates);
* sections: ``summary`` (the three answers at a glance), ``accounting``, ``accuracy``, ``epl``
  with ``composed_epl``, ``residuals``, ``mpl``, ``coverage`` (``dpaudit mpl-coverage`` stores);
* figures: ``figures`` (building blocks: the captioned figure, panel grids, PNG embedding) and one
  module per subject, ``figures_accounting``, ``figures_accuracy``, ``figures_epl``,
  ``figures_residuals``, ``figures_mpl`` (MPL loss curves and LB eCDFs as plain matplotlib
  figures).

``render_report`` is imported on first use, so importing one module of the package (say
``figures_mpl``) does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from flows.report.render import render_report

__all__ = ["render_report"]


def __getattr__(name: str) -> Any:
    if name == "render_report":
        from flows.report.render import render_report

        return render_report
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
