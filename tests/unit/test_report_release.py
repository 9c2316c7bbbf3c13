"""The report's header names the release, its population and attribute schema (from the stored
spec), and a production run's summary says which query cells its residuals hold."""

from __future__ import annotations

import numpy as np
import xarray as xr

from flows.report.release import production_note, release_line
from flows.spec import parse_spec
from flows.spec.toml_writer import dump_toml
from tests.unit.test_production_spec import spine_production


def _attrs(spec: dict) -> dict:  # type: ignore[type-arg]
    return {"spec_toml": dump_toml(parse_spec(spec).model_dump(mode="json"))}


def test_header_names_the_schema() -> None:
    spine = spine_production(replicates=1)
    line = release_line(_attrs(spine))
    assert line is not None
    # one state of 51: the run's national level is that state's sum, and the header says so
    assert "topdown on the spine (states: ST13; US level: 1 of 51 states, not the nation)" in line
    assert "schema pl94_production (2,016 cells: the PL94-171 production" in line
    assert release_line(_attrs(spine), words=False) == (
        "topdown on the spine (states: ST13; US level: 1 of 51 states, not the nation) · "
        "schema pl94_production (2,016 cells)"
    )
    every = release_line(
        _attrs({**spine, "population": {**spine["population"], "spine_states": 51}})
    )
    assert every is not None and "the spine (states: 51) · schema" in every
    synthetic = release_line(
        _attrs({"population": {"attributes": "pl94"}, "release": {"kind": "topdown"}})
    )
    assert synthetic is not None and "schema pl94 (28 cells" in synthetic
    assert release_line(_attrs({})) == "allocation on synthetic"  # no schema: not a TopDown
    assert release_line({}) is None


def test_production_note_counts_the_cells() -> None:
    dims = ("state", "geolevel", "query")
    ds = xr.Dataset(
        {
            "stored_cells": (dims, np.array([[[3, 1]]])),
            "zero_cells": (dims, np.array([[[96, 0]]])),
        },
        attrs={"schema": "dhc_production"},
    )
    note = production_note(ds)
    assert note is not None
    assert "schema dhc_production: 4 query cells stored" in note and "4 % of 100" in note
    assert "the other 96 are zero" in note
    assert production_note(None) is None
