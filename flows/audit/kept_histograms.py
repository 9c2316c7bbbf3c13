"""Histograms a TopDown run with a national level keeps in its staging store until the nation sums
them: per state (or per (state, replicate range)), the State level's released histograms and the
truth, written before the blocks whose markers say the state (or range) is finished. A resumed
run reads a finished one's back instead of simulating it again; the group is dropped once every
block is written, before the store is published. The dense TopDown keeps its own here
(:func:`save_range`, :func:`load_range`); ``flows.audit.production`` keeps its sparse ones with
:func:`save` and :func:`load`."""

from __future__ import annotations

import numpy as np

from storage.result_store import ResultStore

#: the group of a dense TopDown's staging store: per (state, replicate range), the State level's
#: released histograms (rows: the range's replicates) and its true histogram
TOPDOWN_STATE_HISTOGRAMS = "topdown_state_histograms"


def create(store: ResultStore, group: str) -> None:
    """The (empty) group, made once by the flow before its tasks write into it."""
    root = store.zarr_group(mode="r+")
    if group not in root:
        root.create_group(group)


def save(
    store: ResultStore,
    group: str,
    key: str,
    arrays: dict[str, np.ndarray],
    attrs: dict[str, str | float] | None = None,
) -> None:
    """Keep ``arrays`` (and ``attrs``) under ``group/key`` of the staging store, its
    completion attribute last."""
    grp = store.zarr_group(f"{group}/{key}", mode="a")
    grp.attrs["complete"] = False
    for name, data in arrays.items():
        grp.create_array(name, data=np.asarray(data), overwrite=True)
    grp.attrs.update(attrs or {})
    grp.attrs["complete"] = True


def load(
    store: ResultStore, group: str, key: str, names: tuple[str, ...]
) -> dict[str, np.ndarray] | None:
    """The arrays kept by :func:`save` under ``group/key``, or None if they were not kept whole."""
    from zarr.errors import NodeNotFoundError

    try:
        grp = store.zarr_group(f"{group}/{key}")
    except (NodeNotFoundError, FileNotFoundError):
        return None
    if grp.attrs.get("complete") is not True or any(n not in grp for n in names):
        return None
    return {n: np.asarray(grp[n][...]) for n in names}  # type: ignore[index]


def drop(store: ResultStore, group: str) -> None:
    """Drop the group (every block is written: no run needs it again)."""
    store.drop_group(group)


def _range_key(state: int, r0: int) -> str:
    return f"{state}-{r0}"  # flat: tasks of one state's ranges make no shared parent group


def save_range(
    store: ResultStore, state: int, r0: int, state_dp: np.ndarray, state_truth: np.ndarray
) -> None:
    """Keep a dense TopDown (state, range)'s State-level histograms (``flows.audit.blocks.topdown_state``:
    released (replicates of the range, n_cells), true (n_cells,)); before its blocks' ranges."""
    save(
        store,
        TOPDOWN_STATE_HISTOGRAMS,
        _range_key(state, r0),
        {"dp": state_dp, "truth": state_truth},
    )


def load_range(
    store: ResultStore, state: int, replicates: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray] | None:
    """A (state, range)'s State-level histograms kept by :func:`save_range`, or None if none were
    kept whole (for this range's replicates)."""
    r0, r1 = replicates
    got = load(store, TOPDOWN_STATE_HISTOGRAMS, _range_key(state, r0), ("dp", "truth"))
    if got is None or got["dp"].ndim != 2 or got["dp"].shape[0] != r1 - r0:
        return None
    return got["dp"], got["truth"]
