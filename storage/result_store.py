"""One result store, opened once: :class:`ResultStore`, what the CLI, the flows and the report hold
instead of a URL string.

It is a small frozen dataclass (the store's absolute URL, its storage options and the spelling the
user gave), picklable, so it travels to Dask workers inside tasks. Its methods are the store
operations the product uses; each one delegates to the module that implements it (``targets``,
``locks``, ``staging``, ``residual_template``, ``residual_blocks``, ``checksums``, ``files`` and the
groups and parts of ``store``): what is written and read is theirs, unchanged.

A run's staging copy is another store: :meth:`ResultStore.staged` (a directory or key prefix
beside the target, keyed by the run id), published onto its target by :meth:`ResultStore.publish`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from storage import (
    checksums,
    files,
    locks,
    residual_blocks,
    residual_template,
    staging,
    store,
    targets,
)

if TYPE_CHECKING:
    import numpy as np
    import xarray as xr
    import zarr

    from auditlib.simulate.release import ResidualItems
    from storage.residuals import Residuals


@dataclass(frozen=True)
class ResultStore:
    """A result store at one URL (absolute: every worker resolves it alike).

    ``given`` is the URL as the user wrote it (relative, or through a symbolic link): the checks
    that answer the user (:meth:`check_target`, :meth:`check_documents`, :meth:`verify`,
    :meth:`check`) look at that path, as the user named it, and their messages name it so; every
    other operation uses ``url``. ``storage_options`` go to the reads that take them (checksums,
    :meth:`open_residuals`). Build it with :meth:`at`.
    """

    url: str
    storage_options: dict[str, Any] | None = field(default=None, hash=False)
    given: str = field(default="", compare=False, repr=False)

    @classmethod
    def at(cls, url: str, storage_options: Mapping[str, Any] | None = None) -> ResultStore:
        """The store at ``url`` (a path or an ``s3://`` URL), made absolute."""
        given = str(url)
        options = dict(storage_options) if storage_options else None
        return cls(url=targets.absolute(given), storage_options=options, given=given)

    @classmethod
    def of(cls, store: ResultStore | str) -> ResultStore:
        """``store`` itself, or the store at a URL (a flow called with a path, from a notebook or
        a test)."""
        return store if isinstance(store, ResultStore) else cls.at(store)

    def __str__(self) -> str:
        return self.url

    @property
    def shown(self) -> str:
        """The URL as the user gave it (else the absolute one)."""
        return self.given or self.url

    @property
    def remote(self) -> bool:
        """Whether the store is an ``s3://`` (or other remote) prefix rather than a local path."""
        return targets.is_remote(self.url)

    # --- what is there (targets, files) --------------------------------------------------------
    def exists(self) -> bool:
        return targets.exists(self.url)

    def is_complete(self) -> bool:
        return targets.is_complete(self.url)

    def completed_attrs(self) -> dict[str, Any] | None:
        """The root attributes if the store is complete, else ``None`` (one read)."""
        return targets.completed_attrs(self.url)

    def is_dpaudit_store(self, run_id: str | None = None) -> bool:
        return targets.is_dpaudit_store(self.url, run_id)

    def check_target(self, overwrite: bool) -> None:
        """Refuse to replace what is at the path as given (``targets.check_target``)."""
        targets.check_target(self.shown, overwrite)

    def root_attrs(self) -> dict[str, Any]:
        return targets.root_attrs(self.url)

    def group_attrs(self, group: str) -> dict[str, Any]:
        return targets.group_attrs(self.url, group)

    def check_documents(self) -> int:
        """Every metadata document a regular file of bounded size (``files.check_documents``)."""
        return files.check_documents(self.shown)

    # --- the run's lock, staging and publishing (locks, staging) -------------------------------
    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the store's lock for the whole run (``locks.exclusive``)."""
        with locks.exclusive(self.url):
            yield

    def lock_path(self) -> Path:
        return locks.lock_path(self.url)

    def staged(self, run_id: str) -> ResultStore:
        """The store a run of ``run_id`` builds before it is published here (its staging copy)."""
        url = staging.staging_path(self.url, run_id)
        return replace(self, url=url, given=url)

    def stale_stagings(self, run_id: str) -> list[Path] | list[str]:
        """Other runs' staging copies of this store (``staging.stale_stagings``)."""
        return staging.stale_stagings(self.url, run_id)

    def prepare_remote(self, run_id: str, overwrite: bool) -> None:
        staging.prepare_remote(self.url, run_id, overwrite)

    def publish(self, staged: ResultStore) -> None:
        """Put the completed store ``staged`` in place here (``staging.publish``)."""
        staging.publish(staged.url, self.url)

    def discard(self, staged: ResultStore) -> None:
        """Remove the staging copy ``staged`` of this store after a failed run."""
        staging.discard(staged.url, self.url)

    def make_room(self) -> bool:
        """Before a run builds its staging copy here (``staging.make_room``): remains of a removed
        copy deleted (``True``), anything not dpaudit's refused."""
        return staging.make_room(self.url)

    def remove(self, run_id: str | None = None) -> None:
        staging.remove(self.url, run_id)

    # --- small groups, root attributes, completion (store) -------------------------------------
    def write_group(self, group: str, ds: xr.Dataset) -> None:
        store.write_group(self.url, group, ds)

    def write_group_parts(self, group: str, parts: Iterable[xr.Dataset], rows: int) -> int:
        """A long group written part after part, then sealed (``store.write_group_parts``)."""
        return store.write_group_parts(self.url, group, parts, rows)

    def record_checksums(self, group: str) -> None:
        store.record_checksums(self.url, group)

    def group_complete(self, group: str) -> bool:
        return store.group_complete(self.url, group)

    def set_root_attrs(self, attrs: Mapping[str, Any]) -> None:
        store.set_root_attrs(self.url, attrs)

    def finalize(self) -> None:
        store.finalize(self.url)

    def open_group(self, group: str, **kw: Any) -> xr.Dataset:
        return store.open_group(self.url, group, **kw)

    def zarr_group(self, path: str = "", mode: str = "r") -> zarr.Group:
        """The Zarr group at ``path``, as the store is (``store.zarr_group``)."""
        return store.zarr_group(self.url, path, mode, self.storage_options)

    def dataset(self, group: str, *, consolidated: bool = True, chunks: Any = None) -> xr.Dataset:
        """One group as an xarray Dataset, as the store is (``store.dataset``)."""
        return store.dataset(
            self.url,
            group,
            consolidated=consolidated,
            chunks=chunks,
            storage_options=self.storage_options,
        )

    def groups(self) -> list[str]:
        return store.groups(self.url)

    def drop_group(self, group: str) -> None:
        store.drop_group(self.url, group)

    # --- the residual template and its blocks (residual_template, residual_blocks) -------------
    def create_residual_template(self, **kw: Any) -> None:
        """``residual_template.create_residual_template`` (keywords as there)."""
        residual_template.create_residual_template(self.url, **kw)

    def template_complete(self) -> bool:
        return residual_blocks.template_complete(self.url)

    def residual_array(self, name: str, mode: str = "r") -> zarr.Array:
        return residual_blocks.residual_array(self.url, name, mode)

    def block_place(self, state: int, level: int) -> tuple[int, int, int]:
        return residual_blocks.block_place(self.url, state, level)

    def replicate_chunk(self) -> int:
        return residual_blocks.replicate_chunk(self.url)

    def write_residual_block(
        self,
        state: int,
        level: int,
        block: ResidualItems | None,
        *,
        replicates: tuple[int, int] | None = None,
    ) -> int:
        return residual_blocks.write_residual_block(
            self.url, state, level, block, replicates=replicates
        )

    def seal_block(
        self, state: int, level: int, digests: Mapping[str, bytes] | None = None
    ) -> bool:
        return residual_blocks.seal_block(self.url, state, level, digests)

    def seal_pending(self) -> set[tuple[int, int]]:
        return residual_blocks.seal_pending(self.url)

    def done_blocks(self, among: Iterable[tuple[int, int]] | None = None) -> set[tuple[int, int]]:
        return residual_blocks.done_blocks(self.url, among)

    def done_ranges(self) -> set[tuple[int, int, int]]:
        return residual_blocks.done_ranges(self.url)

    def pending_blocks(self) -> set[tuple[int, int]]:
        return residual_blocks.pending_blocks(self.url)

    def resume_point(self, run_id: str) -> set[tuple[int, int]] | None:
        return residual_blocks.resume_point(self.url, run_id)

    def read_residuals(self, state: int, level: int) -> tuple[np.ndarray, np.ndarray]:
        return residual_blocks.read_residuals(self.url, state, level)

    def read_query_index(self, state: int, level: int) -> np.ndarray:
        return residual_blocks.read_query_index(self.url, state, level)

    def read_residual_rows(self, state: int, level: int, rows: int, start: int = 0) -> np.ndarray:
        return residual_blocks.read_residual_rows(self.url, state, level, rows, start)

    def read_cells(self, state: int, level: int) -> np.ndarray:
        return residual_blocks.read_cells(self.url, state, level)

    def read_items(self, state: int, level: int) -> tuple[np.ndarray, np.ndarray]:
        return residual_blocks.read_items(self.url, state, level)

    def open_residuals(self, **kw: Any) -> Residuals:
        """The residuals group of a completed store (``residuals.open_residuals``)."""
        from storage.residuals import open_residuals

        if self.storage_options is not None:
            kw.setdefault("storage_options", self.storage_options)
        return open_residuals(self.url, **kw)

    # --- the parts of a resumable flow (store) -------------------------------------------------
    def claim_staging(self, run_id: str) -> bool:
        return store.claim_staging(self.url, run_id)

    def chunk_parts(
        self,
        group: str,
        arrays: Mapping[str, tuple[tuple[int, ...], tuple[int, ...], str]],
        markers: tuple[int, ...],
    ) -> set[tuple[int, ...]]:
        return store.chunk_parts(self.url, group, arrays, markers)

    def write_part(
        self,
        group: str,
        marker: tuple[int, ...],
        values: Mapping[str, tuple[tuple[int | slice, ...], np.ndarray]],
    ) -> None:
        store.write_part(self.url, group, marker, values)

    def done_parts(self, group: str) -> set[tuple[int, ...]]:
        return store.done_parts(self.url, group)

    def read_parts(self, group: str) -> dict[str, np.ndarray]:
        return store.read_parts(self.url, group)

    # --- checksums ----------------------------------------------------------------------------
    def verify(self) -> checksums.Verification:
        """Every array and document against its recorded checksums (``checksums.verify``)."""
        return checksums.verify(self.shown, self.storage_options)

    def check(self) -> checksums.Verification:
        """:meth:`verify`, raising ``IntegrityError`` on the first problem (``checksums.check``)."""
        return checksums.check(self.shown, self.storage_options)

    def metadata_digests(self) -> dict[str, str]:
        return checksums.metadata_digests(self.url, self.storage_options)
