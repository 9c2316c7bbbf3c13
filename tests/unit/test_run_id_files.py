"""Run ids count the files a spec names by their content, not their paths: a table
(``population.path``), the published runs' files and an allocation file. One byte changed gives a
new run id (a resumed run never mixes two versions of a file); the same bytes elsewhere the same id.
An allocation file is recorded in a store by its name and content digest, never its path."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

from auditlib.allocations import allocation_label
from flows.audit.flow import run_id_for
from flows.experiments.direct_loss import direct_run_id
from flows.experiments.direct_runs import SpecDirectParams
from flows.spec import load_spec

TRUTH = "state,county,total\nB,b1,300\nA,a1,120\nB,b2,50\nA,a2,80\nB,b3,10\n"
RUN0 = "state,county,total\nA,a2,83\nB,b3,9\nB,b1,297\nA,a1,121\nB,b2,50\n"
RUN1 = "state,county,total\nA,a1,118\nA,a2,80\nB,b1,302\nB,b2,55\nB,b3,7\n"
ALLOC = (
    "geolevel,query,mechanism,sigma2,neighbours\n"
    "State,total,discrete_gaussian,4,add_remove\nCounty,total,discrete_gaussian,2,add_remove\n"
)
TABLE = (
    '[population]\nkind = "table"\npath = "truth.csv"\ncounts = ["total"]\nlevels = ["state"]\n'
    'unit = "county"\n'
)


def write(where: Path, release: str, files: dict[str, str], head: str = TABLE) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (where / name).write_text(text, encoding="utf-8")
    spec = where / "spec.toml"
    spec.write_text(head + release, encoding="utf-8")
    return spec


def flip_one_byte(path: Path) -> None:
    text = path.read_text(encoding="utf-8")  # ends in a digit and a newline
    path.write_text(text[:-2] + str((int(text[-2]) + 1) % 10) + "\n", encoding="utf-8")


def test_a_tables_content_sets_the_run_id(tmp_path: Path) -> None:
    spec = write(tmp_path / "a", '[release]\nkind = "gdpc"\nepsilon = 0.5\n', {"truth.csv": TRUTH})
    before = run_id_for(load_spec(spec))
    shutil.copytree(tmp_path / "a", tmp_path / "elsewhere" / "b")
    assert run_id_for(load_spec(tmp_path / "elsewhere" / "b" / "spec.toml")) == before
    flip_one_byte(tmp_path / "a" / "truth.csv")
    assert run_id_for(load_spec(spec)) != before


def test_published_files_and_their_truth_set_the_run_id(tmp_path: Path) -> None:
    release = '[release]\nkind = "observed"\npublished_files = ["run0.csv", "run1.csv"]\n'
    files = {"truth.csv": TRUTH, "run0.csv": RUN0, "run1.csv": RUN1}
    spec = write(tmp_path / "a", release, files)
    before = run_id_for(load_spec(spec))
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    assert run_id_for(load_spec(tmp_path / "b" / "spec.toml")) == before
    flip_one_byte(tmp_path / "a" / "run1.csv")
    after_run = run_id_for(load_spec(spec))
    assert after_run != before
    flip_one_byte(tmp_path / "a" / "truth.csv")
    assert run_id_for(load_spec(spec)) not in (before, after_run)


def test_direct_run_ids_follow_the_content_too(tmp_path: Path) -> None:
    spec = write(tmp_path / "a", '[audit]\nallocation = "mine.csv"\n', {"mine.csv": ALLOC}, "")
    shutil.copytree(tmp_path / "a", tmp_path / "b")

    def run_id(where: Path) -> str:
        s = load_spec(where / "spec.toml")
        return direct_run_id(SpecDirectParams(spec=s.to_toml(), replicates=10))

    before = run_id(tmp_path / "a")
    assert run_id(tmp_path / "b") == before
    (tmp_path / "a" / "mine.csv").write_text(ALLOC.replace(",4,", ",5,"), encoding="utf-8")
    assert run_id(tmp_path / "a") != before
    assert spec.exists()


def test_an_allocation_file_is_labelled_by_name_and_content(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "mine.csv"
    path.parent.mkdir()
    path.write_text(ALLOC, encoding="utf-8")
    digest = hashlib.sha256(ALLOC.encode()).hexdigest()
    assert allocation_label(str(path)) == f"mine.csv@sha256:{digest[:16]}"
    assert allocation_label("dhcp_20220825_paper") == "dhcp_20220825_paper"
