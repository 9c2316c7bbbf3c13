"""The generated references are up to date, and every estimator has its derivation note."""

from __future__ import annotations

import pathlib

import pytest

from flows.cli import docgen

DOCS = pathlib.Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("name", [docgen.SPEC_REFERENCE, docgen.CLI_REFERENCE])
def test_generated_reference_is_up_to_date(name: str) -> None:
    committed = (DOCS / name).read_text(encoding="utf-8")
    assert committed == docgen.outputs()[DOCS / name], "run `python -m flows.docgen`"


def test_spec_reference_covers_every_key() -> None:
    from flows.spec import AuditSpec

    text = docgen.spec_reference()
    for section, field in AuditSpec.model_fields.items():
        assert f"## `[{section}]`" in text
        sub = field.annotation
        assert sub is not None
        for name, info in sub.model_fields.items():  # type: ignore[union-attr]
            key = info.serialization_alias or name  # TOML key (cluster.class: field cluster_class)
            assert f"| `{key}` |" in text, (section, key)
    # the default spec's comments become the explanation
    assert "simulated releases per (state, geolevel)" in text


def test_cli_reference_covers_every_command() -> None:
    text = docgen.cli_reference()
    for cmd in (
        "run",
        "report",
        "spec",
        "sweep",
        "mpl-coverage",
        "fdp-coverage",
        "account",
        "calibrate",
        "tradeoff",
        "serve",
        "verify",
        "direct",
    ):
        assert f"## `dpaudit {cmd}`" in text
    assert "`--overwrite" in text


def test_check_mode_reports_stale_files(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docgen, "DOCS", tmp_path)
    assert docgen.main(["--check"]) == 1  # nothing written yet
    assert docgen.main([]) == 0
    assert docgen.main(["--check"]) == 0


@pytest.mark.parametrize("note", ["accounting.md", "epl.md", "mpl.md", "accuracy.md"])
def test_each_estimator_has_a_derivation_note(note: str) -> None:
    text = (DOCS / note).read_text(encoding="utf-8").lower()
    assert "assum" in text  # its assumptions
    assert "errs" in text or "err " in text  # which way it errs
    assert "estimat" in text or "computes" in text  # what it estimates
