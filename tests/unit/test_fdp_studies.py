"""The stored empirical f-DP studies meet their targets, and the docs quote them.

``benchmarks/results/fdp_coverage.csv`` (``benchmarks/fdp_coverage_study.py``): every cell's
simultaneous coverage is ≥ 0.94 at nominal 0.95 with both bands, the broken entries are detected,
and the table in ``docs/mpl.md`` is that CSV. ``benchmarks/results/fdp_sequential.csv``
(``benchmarks/fdp_sequential_study.py``): the sequential method makes no more wrong decisions than
its stated level allows and uses fewer draws than the fixed-size one; the table in
``benchmarks/README.md`` is that CSV.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _rows(name: str) -> list[dict[str, str]]:
    with (RESULTS / name).open() as fh:
        return list(csv.DictReader(fh))


def _table(path: Path, header: str) -> list[list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    start = lines.index(header)
    out = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        out.append([c.strip() for c in line.strip("|").split("|")])
    return out


COVERAGE_HEADER = (
    "| mechanism | parameter | coverage CP / DKW | plug-in | median μ_LB / μ | median ε_LB / ε "
    "| detected |"
)
SEQUENTIAL_HEADER = (
    "| mode | mechanism | sequential: refuted / consistent / undecided | mean draws | fixed: "
    "refuted / consistent / undecided | draws | wrong (seq / fixed) |"
)


def _f(v: str) -> str:
    x = float(v)
    return "∞" if math.isinf(x) else f"{x:.3f}"


def test_coverage_study_meets_the_nominal_level() -> None:
    rows = _rows("fdp_coverage.csv")
    assert {r["band"] for r in rows} == {"clopper-pearson", "dkw"}
    for r in rows:
        assert int(r["reps"]) >= 400
        assert float(r["coverage"]) >= 0.94, r
        if r["mechanism"].endswith("broken"):
            assert float(r["detection_rate"]) >= 0.9, r
        else:  # refuting a correct claim needs a point below the curve: not covered
            assert float(r["detection_rate"]) <= 1.0 - float(r["coverage"]) + 1e-9, r


def test_coverage_table_is_the_stored_study() -> None:
    rows = _rows("fdp_coverage.csv")
    cp = [r for r in rows if r["band"] == "clopper-pearson"]
    dkw = {(r["mechanism"], r["parameter"]): r for r in rows if r["band"] == "dkw"}
    table = _table(ROOT / "docs" / "mpl.md", COVERAGE_HEADER)
    assert len(table) == len(cp)
    for cells, r in zip(table, cp, strict=True):
        d = dkw[(r["mechanism"], r["parameter"])]
        assert cells == [
            r["mechanism"],
            f"{float(r['parameter']):g}",
            f"{float(r['coverage']):.3f} / {float(d['coverage']):.3f}",
            f"{float(r['plugin_coverage']):.3f}",
            f"{_f(r['median_mu_lower'])} / {_f(r['mu'])}",
            f"{_f(r['median_epsilon_lower'])} / {_f(r['epsilon'])}",
            f"{float(r['detection_rate']):.2f}",
        ]


def test_sequential_study_saves_draws_at_the_same_error_level() -> None:
    rows = _rows("fdp_sequential.csv")
    by = {(r["mode"], r["mechanism"], r["method"]): r for r in rows}
    for (mode, name, method), r in by.items():
        if method != "sequential":
            continue
        fixed = by[(mode, name, "fixed")]
        n = int(r["reps"])
        assert float(r["wrong_rate"]) <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / n), r
        assert float(r["mean_draws"]) <= float(fixed["mean_draws"]), r
        if r["broken"] == "True":
            assert float(r["refuted"]) >= 0.9, r


def test_sequential_table_is_the_stored_study() -> None:
    rows = _rows("fdp_sequential.csv")
    by = {(r["mode"], r["mechanism"], r["method"]): r for r in rows}
    keys = [(r["mode"], r["mechanism"]) for r in rows if r["method"] == "sequential"]
    table = _table(ROOT / "benchmarks" / "README.md", SEQUENTIAL_HEADER)
    assert len(table) == len(keys)

    def dec(r: dict[str, str]) -> str:
        return " / ".join(f"{float(r[k]):.3f}" for k in ("refuted", "consistent", "undecided"))

    for cells, (mode, name) in zip(table, keys, strict=True):
        s, f = by[(mode, name, "sequential")], by[(mode, name, "fixed")]
        assert cells == [
            mode,
            name,
            dec(s),
            f"{float(s['mean_draws']):,.0f}",
            dec(f),
            f"{float(f['mean_draws']):,.0f}",
            f"{float(s['wrong_rate']):.3f} / {float(f['wrong_rate']):.3f}",
        ]


def test_mixture_study_meets_the_level_and_refutes_broken_entries() -> None:
    for r in _rows("fdp_sequential_mixture.csv"):
        assert r["method"] == "mixture" and int(r["reps"]) >= 200
        assert float(r["wrong_rate"]) <= 0.05, r
        if r["broken"] == "True":
            assert float(r["refuted"]) == 1.0 and float(r["mean_draws"]) == 50_000, r
