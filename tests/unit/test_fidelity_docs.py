"""The coverage the docs state is the coverage the stored studies measured.

``docs/epl.md`` states the coverage of the EPL interval per n from
``benchmarks/results/epl_lattice_coverage_{gdpc,adpc}.csv`` (GDPC's basic interval: 0.73–0.93 per
cell, not the 81–91 % a smaller study suggested), and ``docs/mpl.md`` the coverage and tightness of
each confidence-step bandwidth rule from ``mpl_bandwidth_study.csv``. Each table cell is checked
against the CSV it quotes, so a re-run study and its docs cannot drift apart.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _rows(name: str) -> list[dict[str, str]]:
    with (RESULTS / name).open() as fh:
        return list(csv.DictReader(fh))


def _table(doc: str, header: str) -> dict[int, list[str]]:
    """Rows of the markdown table whose header line is ``header``: n -> cells."""
    lines = (ROOT / "docs" / doc).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line == header)
    out = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        out[int(cells[0].replace(",", ""))] = cells[1:]
    return out


def _coverage(rows: list[dict[str, str]], estimator: str) -> dict[tuple[float, int], float]:
    return {
        (float(r["epsilon"]), int(r["n"])): float(r["coverage"])
        for r in rows
        if r["estimator"] == estimator
    }


EPS = (0.01, 0.1, 0.5, 1.0, 2.0)


def test_gdpc_coverage_per_n_is_the_stored_study() -> None:
    cov = _coverage(_rows("epl_lattice_coverage_gdpc.csv"), "default")
    table = _table("epl.md", "| n \\ ε | 0.01 | 0.1 | 0.5 | 1 | 2 | mean |")
    assert sorted(table) == sorted({n for _, n in cov})
    for n, cells in table.items():
        vals = [cov[(e, n)] for e in EPS]
        assert cells[:5] == [f"{v:.2f}" for v in vals], n
        assert cells[5] == f"{np.mean(vals):.2f}", n
    every = list(cov.values())
    assert f"**{min(every):.2f}–{max(every):.2f} per cell" in (ROOT / "docs" / "epl.md").read_text(
        encoding="utf-8"
    )
    assert max(np.mean([cov[(e, n)] for e in EPS]) for n in table) < 0.9  # below nominal


def test_adpc_coverage_table_is_the_stored_study() -> None:
    rows = _rows("epl_lattice_coverage_adpc.csv")
    new, old = _coverage(rows, "default"), _coverage(rows, "integer_grid")
    table = _table("epl.md", "| n \\ ε | 0.01 | 0.1 | 0.5 | 1 | 2 |")
    for n, cells in table.items():
        for e, cell in zip(EPS, cells, strict=True):
            m = re.fullmatch(r"([0-9.]+)(?: \(([0-9.]+)\))?", cell)
            assert m is not None, cell
            assert m.group(1) == f"{new[(e, n)]:.2f}", (e, n)
            if m.group(2) is not None:
                assert m.group(2) == f"{old[(e, n)]:.2f}", (e, n)
    assert min(new.values()) >= 0.9 - 0.03  # nominal, up to ≈ one binomial sd of 100 sets


@pytest.mark.parametrize(
    ("rule", "label"),
    [
        ("beta1", "β = 1, γ = 0.05"),
        ("beta2", "**β = 2, γ = 0.05**"),
        ("beta2_g0.02", "β = 2, γ = 0.02"),
    ],
)
def test_mpl_rule_table_is_the_stored_study(rule: str, label: str) -> None:
    rows = [r for r in _rows("mpl_bandwidth_study.csv") if r["rule"] == rule]
    line = next(
        ln
        for ln in (ROOT / "docs" / "mpl.md").read_text(encoding="utf-8").splitlines()
        if ln.startswith(f"| {label}")
    )
    cells = [c.strip() for c in line.strip("|").split("|")]
    for k, mech in enumerate(("laplace", "exponential", "continuous_noisy_max")):
        mine = sorted(
            (r for r in rows if r["mechanism"] == mech), key=lambda r: float(r["epsilon0"])
        )
        cover = " / ".join(f"{float(r['coverage']):.3f}" for r in mine)
        tight = " / ".join(f"{float(r['mean_lb_over_eps_c']):.2f}" for r in mine)
        assert cells[2 + k] == f"{cover} — {tight}", (rule, mech)
    pooled = next(r for r in rows if r["mechanism"] == "pooled")
    assert (
        cells[5] == f"{float(pooled['coverage']):.3f} — {float(pooled['mean_lb_over_eps_c']):.2f}"
    )
