"""Comparing stores in the integration tests: every array's digest, two stores' equality, the
store an undisturbed audit writes (the reference a resumed run must equal), a resumed coverage
store checked against its undisturbed run, and the smallest
finished dpaudit store (what the store-safety tests replace, delete or stage)."""

from __future__ import annotations

import fcntl
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import zarr

from storage import checksums, store

if TYPE_CHECKING:
    from flows.spec import AuditSpec


def array_digests(url: str) -> dict[str, str]:
    """sha256 of every array of every group (values as stored), keyed 'group/name'."""
    root = zarr.open_group(url, mode="r", zarr_format=3)
    out = {}
    for gname, grp in root.groups():
        for name, arr in grp.arrays():
            values: Any = arr[...]
            out[f"{gname}/{name}"] = checksums.digest(values).hex()
    return out


def assert_same_arrays(got: str, want: str, at_least: int) -> None:
    """The stores ``got`` and ``want`` hold the same groups and the same values in each of their
    arrays, of which ``want`` has ``at_least``."""
    assert store.groups(got) == store.groups(want)
    digests, wanted = array_digests(got), array_digests(want)
    assert len(wanted) >= at_least, sorted(wanted)
    assert digests == wanted


def assert_resumed_coverage(
    stdout: str, resumed: int, n_chunks: int, target: Path, group: str
) -> None:
    """A killed coverage command, run again to its end (``stdout``), resumed ``resumed`` of its
    ``n_chunks`` chunks and published ``target`` alone in its directory (nothing staged is left),
    holding ``group`` only, its checksums sound."""
    assert f"resumed {resumed} of {n_chunks} chunks" in stdout
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]
    assert store.groups(str(target)) == [group]
    checksums.check(str(target))


def assert_same_as_undisturbed(
    summary: dict[str, Any], n_chunks: int, ref: str, target: Path, cells: int = 2
) -> None:
    """The undisturbed coverage run into ``ref`` (its flow's ``summary``) computed every chunk of
    its ``cells`` cells, none resumed; finalized, it holds ``target``'s arrays (at least 10)."""
    assert summary == {"cells": cells, "tasks": n_chunks, "computed": n_chunks, "resumed": 0}
    store.finalize(ref)
    assert_same_arrays(str(target), ref, at_least=10)


def undisturbed_audit(spec: AuditSpec, url: str, address: str) -> dict[str, Any]:
    """Run the audit of ``spec`` in this process on the Dask cluster at ``address`` into ``url``,
    and finalize that store; the flow's summary."""
    from prefect_dask import DaskTaskRunner

    from flows.audit.flow import audit_flow, run_id_for

    flow = audit_flow.with_options(task_runner=DaskTaskRunner(address=address))
    summary: dict[str, Any] = flow(spec, url, run_id_for(spec))
    store.finalize(url)
    return summary


def shared_undisturbed_audit(spec: AuditSpec, root: Path, address: str) -> str:
    """The store of :func:`undisturbed_audit` of ``spec`` in ``root``, run once for the tests that
    share ``root`` (:func:`session_root`: every xdist worker of one session): the first to ask
    runs it, the others wait for it and read it."""
    from flows.audit.flow import run_id_for

    url = root / f"undisturbed-{run_id_for(spec)}.zarr"
    with open(url.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not store.is_complete(str(url)):
            shutil.rmtree(url, ignore_errors=True)  # a test stopped while it ran
            undisturbed_audit(spec, str(url), address)
    return str(url)


def session_root(factory: pytest.TempPathFactory, worker_id: str) -> Path:
    """A directory of this test session shared by its xdist workers (``worker_id`` the
    pytest-xdist fixture's: ``master`` without them)."""
    base = factory.getbasetemp()
    root = (base if worker_id == "master" else base.parent) / "shared"
    root.mkdir(exist_ok=True)
    return root


def one_block_template(url: str, run_id: str = "abc") -> None:
    """The residual template of run ``run_id`` at ``url`` (a path or an ``s3://`` URL): one
    block, at US, of one query; nothing written in it yet."""
    store.create_residual_template(
        url,
        states=["US"],
        geolevels=["US"],
        replicates=1,
        n_items=2,
        queries=["q"],
        sigma2=np.full((1, 1), 4.0),
        attrs={"run_id": run_id},
    )


def finished_store(url: str, run_id: str = "abc") -> None:
    """A finished dpaudit store at ``url`` of run ``run_id``: :func:`one_block_template` with its
    block written empty, finalized."""
    one_block_template(url, run_id)
    store.write_residual_block(url, 0, 0, None)
    store.finalize(url)
