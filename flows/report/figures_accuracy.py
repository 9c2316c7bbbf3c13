"""The accuracy figure: the exact MSE or MAE of one count released as max(0, count + noise) with
discrete-Gaussian noise against its true count, under the Bureau's and the reduced σ², one panel
per geographic level (Su, Su & Wang §3.4)."""

from __future__ import annotations

import numpy as np

from flows.report.figures import ReportFigure, label_panel, new_figure, to_data_uri
from flows.report.format import fmt_num

BUREAU_COLOUR = "#c0392b"
REDUCED_COLOUR = "#1f5fa8"


def accuracy_figure(
    metric: str,
    clipped: np.ndarray | None,
    plain: np.ndarray,
    *,
    levels: list[str],
    picks: list[tuple[str, int]],
    counts: list[int],
    sigma2: np.ndarray,
    bureau: int,
    reduced: int | None,
) -> ReportFigure | None:
    """``metric`` (MSE or MAE) of a count against its true count, clipped at 0 (points) and not
    (dashed), under the Bureau's (red) and the reduced (blue) noise: one panel per level of
    ``picks`` (level, representative query); ``bureau``/``reduced`` index the noise axis."""
    if clipped is None or not counts:
        return None
    fig, axes = new_figure(len(picks))
    x = np.asarray(counts)
    for ax, (level, q) in zip(axes, picks, strict=True):
        i = levels.index(level)
        for k, colour, label in (
            (bureau, BUREAU_COLOUR, "Bureau σ²"),
            (reduced, REDUCED_COLOUR, "reduced σ²"),
        ):
            if k is None or not np.isfinite(plain[i, q, k]):
                continue
            ax.plot(x, clipped[i, q, k], "o-", color=colour, ms=3, lw=1.4, label=label)
            ax.axhline(plain[i, q, k], color=colour, lw=0.9, ls="--")
        ax.set_ylim(bottom=0)
        label_panel(ax, f"{level} (σ² = {fmt_num(sigma2[i, q, bureau], 4)})", "true count", metric)
    if axes:
        axes[0].legend(fontsize=7, frameon=False, loc="lower right")
    return ReportFigure(
        title=f"{metric} of a count per geographic level, clipped at 0 and not",
        alt=(
            f"One panel per level ({', '.join(lv for lv, _ in picks)}) of the {metric} of a "
            "noisy count against its true count 0 to 10 after clipping at 0 (points), under "
            "the Bureau's (red) and the reduced (blue) noise; dashed: without clipping."
        ),
        caption=(
            f"Exact {metric} of one count released as max(0, count + noise) with "
            "discrete-Gaussian noise, against the true count (points, solid), and without "
            "post-processing (dashed: the large-count limit, where clipping never acts). Red: "
            "the Bureau's σ²; blue: the reduced σ² with the same exact ε(δ*) as the Bureau's "
            "claim. Clipping halves the error at count 0 and fades within a few σ."
        ),
        src=to_data_uri(fig),
    )
