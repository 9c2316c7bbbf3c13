"""A published release beside its truth (auditlib.geography.observed): residuals at every level
against sums done here with pandas, runs as columns or files, and every refusal naming its place."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.observed import read_observed


def truth_and_runs(seed: int = 4, runs: int = 3) -> pd.DataFrame:
    """12 counties in 3 states, two cells, and ``runs`` published runs of each cell."""
    rng = np.random.default_rng(seed)
    n = 12
    df = pd.DataFrame(
        {
            "state": [f"S{i % 3}" for i in range(n)],  # interleaved: read_counts sorts the rows
            "county": [f"C{i:02d}" for i in range(n)],
            "a": rng.integers(0, 50, n),
            "b": rng.integers(0, 50, n),
        }
    )
    for r in range(runs):
        for c in ("a", "b"):
            df[f"{c}{r}"] = df[c] + rng.integers(-3, 4, n)
    return df


def published_cols(runs: int = 3) -> list[list[str]]:
    return [[f"a{r}", f"b{r}"] for r in range(runs)]


def test_residuals_at_every_level_are_published_minus_true_sums() -> None:
    df = truth_and_runs()
    obs = read_observed(df, ["a", "b"], levels=["state"], unit="county", published=published_cols())
    assert obs.n_runs == 3
    assert obs.queries == ("total", "detailed")
    for level, keys in (("county", ["state", "county"]), ("state", ["state"]), (None, [])):
        block = obs.residual_block(level)
        g = df.groupby(keys, sort=True).sum(numeric_only=True) if keys else df.sum().to_frame().T
        units = len(g)
        for r in range(3):
            tot = (g[f"a{r}"] + g[f"b{r}"] - g["a"] - g["b"]).to_numpy()
            det = np.stack([g[f"a{r}"] - g["a"], g[f"b{r}"] - g["b"]], axis=1).ravel()
            np.testing.assert_array_equal(block.residual[r], np.r_[tot, det])
        np.testing.assert_array_equal(
            block.truth, np.r_[(g["a"] + g["b"]).to_numpy(), g[["a", "b"]].to_numpy().ravel()]
        )
        assert block.query_index.tolist() == [0] * units + [1] * (2 * units)
        assert block.cell_index.tolist() == [0] * units + [0, 1] * units


def test_runs_as_files_in_any_row_order_equal_runs_as_columns(tmp_path: Path) -> None:
    df = truth_and_runs()
    truth = df[["state", "county", "a", "b"]]
    truth.to_csv(tmp_path / "truth.csv", index=False)
    files = []
    for r in range(3):
        run = df[["state", "county", f"a{r}", f"b{r}"]].rename(columns={f"a{r}": "a", f"b{r}": "b"})
        run = run.sample(frac=1.0, random_state=r)  # shuffled rows
        run.to_csv(tmp_path / f"run{r}.csv", index=False)
        files.append(str(tmp_path / f"run{r}.csv"))
    kw = {"levels": ["state"], "unit": "county"}
    by_files = read_observed(tmp_path / "truth.csv", ["a", "b"], published_files=files, **kw)
    by_cols = read_observed(df, ["a", "b"], published=published_cols(), **kw)
    np.testing.assert_array_equal(by_files.published, by_cols.published)


def test_real_valued_runs_are_accepted_only_when_declared() -> None:
    df = truth_and_runs()
    df["a1"] = df["a1"] + 0.25
    kw = {"levels": ["state"], "unit": "county", "published": published_cols()}
    with pytest.raises(InvalidParameterError, match=r"column 'a1', row 0 .*not a whole number"):
        read_observed(df, ["a", "b"], **kw)
    obs = read_observed(df, ["a", "b"], integer=False, **kw)
    detailed = obs.residual_block("county").residual[1, 12:].reshape(12, 2)  # after the totals
    rows = obs.population.rows
    np.testing.assert_allclose(detailed[:, 0], (df["a1"] - df["a"]).to_numpy()[rows])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.drop(columns=["b2"]), r"Missing columns \['b2'\] \(published run 2\)"),
        (lambda d: d.assign(a0=d["a0"].where(d.index != 5)), r"column 'a0', row 5 .*missing"),
        (
            lambda d: d.assign(b1=d["b1"].astype(float).where(d.index != 7, np.inf)),
            r"count inf in column 'b1', row 7",
        ),
        (lambda d: d.assign(b1=d["b1"].astype(str)), r"column 'b1': dtype"),
    ],
)
def test_bad_published_columns_are_refused_naming_row_and_column(change, message) -> None:  # type: ignore[no-untyped-def]
    df = change(truth_and_runs())
    with pytest.raises(InvalidParameterError, match=message):
        read_observed(df, ["a", "b"], levels=["state"], unit="county", published=published_cols())


def test_a_run_file_missing_or_adding_a_unit_is_refused(tmp_path: Path) -> None:
    df = truth_and_runs(runs=1)
    df[["state", "county", "a", "b"]].to_csv(tmp_path / "truth.csv", index=False)
    run = df[["state", "county", "a0", "b0"]].rename(columns={"a0": "a", "b0": "b"})
    kw = {"levels": ["state"], "unit": "county"}
    run.iloc[1:].to_csv(tmp_path / "short.csv", index=False)
    with pytest.raises(InvalidParameterError, match=r"unit \('S0', 'C00'\) .*missing from"):
        read_observed(
            tmp_path / "truth.csv", ["a", "b"], published_files=[tmp_path / "short.csv"], **kw
        )
    extra = pd.concat([run, run.iloc[[0]].assign(county="C99")])
    extra.to_csv(tmp_path / "extra.csv", index=False)
    with pytest.raises(
        InvalidParameterError, match=r"row 12 of .*extra.csv.* is unit \('S0', 'C99'\)"
    ):
        read_observed(
            tmp_path / "truth.csv", ["a", "b"], published_files=[tmp_path / "extra.csv"], **kw
        )
    twice = pd.concat([run, run.iloc[[3]]])
    twice.to_csv(tmp_path / "twice.csv", index=False)
    with pytest.raises(InvalidParameterError, match=r"appears twice .*\(row 12\)"):
        read_observed(
            tmp_path / "truth.csv", ["a", "b"], published_files=[tmp_path / "twice.csv"], **kw
        )
    run.drop(columns=["b"]).to_csv(tmp_path / "nob.csv", index=False)
    with pytest.raises(InvalidParameterError, match=r"Missing columns \['b'\] in published run"):
        read_observed(
            tmp_path / "truth.csv", ["a", "b"], published_files=[tmp_path / "nob.csv"], **kw
        )


def test_runs_given_both_ways_or_neither_are_refused() -> None:
    df = truth_and_runs()
    with pytest.raises(InvalidParameterError, match="not neither"):
        read_observed(df, ["a", "b"], unit="county")
    with pytest.raises(InvalidParameterError, match="one published column per count column"):
        read_observed(df, ["a", "b"], unit="county", published=[["a0"]])
