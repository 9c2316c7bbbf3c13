"""Tumult Analytics (the platform of the Census Bureau's S-DHC and Detailed DHC-A) as a client:
one noisy count per county, published ``--runs`` times.

Runs with the interpreter of its own environment (Tumult Analytics pins an older numpy and pandas
and needs pyspark 3.5, which runs on a Java 17 runtime); ``python examples/clients.py --mechanism
tumult-count`` makes that environment and calls this script so. By hand, from the repository
root::

    python -m venv .venv-tumult
    .venv-tumult/bin/pip install -r examples/tumult-requirements.txt
    .venv-tumult/bin/python examples/tumult_client.py TRUTH.csv OUT.csv --epsilon 1 --runs 20

``TRUTH.csv`` has the columns ``state``, ``county`` and one count column (``--count``, default
``popamerindian``). Each county's count becomes that many person rows (one per person: the unit
Tumult's ``AddOneRow`` protects); a ``Session`` with a budget of ``runs`` times the query's holds
them, and each run is the query "people per (state, county)", grouped by the public key set of all
counties (so a county with nobody still gets its noisy count). Under a pure-DP budget ε
(``--epsilon``) Tumult adds two-sided geometric noise of scale 1/ε to each count (``AddOneRow``: a
count moves by at most one); under ρ-zCDP (``--rho``) discrete Gaussian noise of variance parameter
σ² = 1/(2ρ). ``OUT.csv`` is the truth with the runs as columns ``dp0``, ``dp1``, …; ``OUT.json``
beside it records what Tumult reports of its own noise (``Session._noise_info`` of the query
before it runs: mechanism and parameter), the budget, the library versions and the run time.
Tumult draws its noise from the operating system's generator and cannot be seeded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

#: Spark in one local process on the loopback address, quiet, no web UI
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
}


def spark_session(warehouse: str) -> Any:
    """Local Spark; Tumult's temporary tables go under ``warehouse``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("dpaudit-tumult-client")
    builder = builder.config("spark.sql.warehouse.dir", warehouse)
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("truth", type=Path, help="CSV of state, county and the count")
    ap.add_argument("out", type=Path, help="CSV written: the truth and the runs dp0, dp1, ...")
    budget = ap.add_mutually_exclusive_group(required=True)
    budget.add_argument("--epsilon", type=float, help="pure-DP budget of each run")
    budget.add_argument("--rho", type=float, help="rho-zCDP budget of each run")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--count", default="popamerindian")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be >= 1")

    # pyspark's own deprecation notes on the pandas UDFs Tumult defines: not ours to act on
    warnings.filterwarnings("ignore", category=UserWarning, module="pyspark")
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    with tempfile.TemporaryDirectory(prefix="tumult-warehouse-") as warehouse:
        info = publish(args, warehouse)
    args.out.with_suffix(".json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info))


def publish(args: argparse.Namespace, warehouse: str) -> dict[str, Any]:
    """The runs, written to ``args.out``; what the client reports of them and of Tumult."""
    import pandas as pd
    import tmlt.analytics as ta
    import tmlt.core
    from tmlt.analytics.utils import cleanup

    start = time.perf_counter()
    truth = pd.read_csv(args.truth, dtype={"state": str, "county": str})
    counts = truth[args.count].to_numpy()
    if (counts < 0).any():
        raise SystemExit(f"{args.truth}: negative counts in column {args.count!r}")
    people = truth.loc[truth.index.repeat(counts), ["state", "county"]].reset_index(drop=True)

    spark = spark_session(warehouse)
    if args.epsilon is not None:
        per_run: ta.PrivacyBudget = ta.PureDPBudget(args.epsilon)
        total: ta.PrivacyBudget = ta.PureDPBudget(args.epsilon * args.runs)
    else:
        per_run, total = ta.RhoZCDPBudget(args.rho), ta.RhoZCDPBudget(args.rho * args.runs)
    session = ta.Session.from_dataframe(
        privacy_budget=total,
        source_id="people",
        dataframe=spark.createDataFrame(people),
        protected_change=ta.AddOneRow(),
    )
    keys = ta.KeySet.from_dataframe(spark.createDataFrame(truth[["state", "county"]]))
    query = ta.QueryBuilder("people").groupby(keys).count(name="published")
    noise = [
        {"mechanism": n["noise_mechanism"].name.lower(), "parameter": float(n["noise_parameter"])}
        for n in session._noise_info(query, per_run)
    ]
    ready = time.perf_counter()

    out = truth[["state", "county", args.count]].copy()
    for r in range(args.runs):
        got = session.evaluate(query, per_run).toPandas()
        merged = out[["state", "county"]].merge(got, on=["state", "county"], how="left")
        if merged["published"].isna().any() or len(merged) != len(out):
            raise SystemExit(f"run {r}: Tumult did not publish every county once")
        out[f"dp{r}"] = merged["published"].astype("int64").to_numpy()
    cleanup()  # Tumult's temporary tables
    spark.stop()

    args.out.parent.mkdir(parents=True, exist_ok=True)
    out.to_csv(args.out, index=False)
    return {
        "library": f"tmlt.analytics {ta.__version__}, tmlt.core {tmlt.core.__version__}",
        "budget": {"epsilon": args.epsilon} if args.epsilon is not None else {"rho": args.rho},
        "protected_change": "AddOneRow",
        "noise": noise,
        "runs": args.runs,
        "people": len(people),
        "seconds_setup": round(ready - start, 1),
        "seconds_runs": round(time.perf_counter() - ready, 1),
        "python": sys.executable,
        "pyspark_python": os.environ.get("PYSPARK_PYTHON", ""),
    }


if __name__ == "__main__":
    main()
