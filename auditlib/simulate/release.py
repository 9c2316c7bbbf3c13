"""Simulated discrete-Gaussian releases of one (state, geolevel) block and their residuals.

Every cell of every measured query gets independent discrete Gaussian noise N_Z(0, σ_q²) — the
noisy-measurement step of TopDown, with optional clipping of the DP counts at zero. Residuals are
DP − truth for every cell, zero cells included.

Population model (synthetic): each query's cells get national shares drawn once from a Dirichlet
distribution (small concentration -> many empty cells); a geounit's true cell counts are multinomial
in its population. Only the first ``n_sim`` cells of a large marginal are simulated; the rest are lumped
into one unsimulated category, so the simulated cells' truths have the right marginal law.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

from auditlib.exceptions import InvalidParameterError
from auditlib.simulate.noise import noise_sampler

Postprocess = Literal["none", "nonnegative"]

#: Most memory the residuals of one block may take: replicates × items × the bytes each replicate
#: holds per item (4 for the float32 residuals written to the store; more where whole releases are
#: kept until the block is cut). 4 GiB, so two workers of a 2-core, 24 GB machine fit with room for
#: the store's buffers; a larger block is refused before its replicates are drawn, naming the
#: memory it would need and the most replicates allowed (split the block, or run fewer).
MAX_BLOCK_BYTES = 4 * 2**30


def check_block_size(replicates: int, items: int, bytes_per_item: int = 4) -> None:
    """Refuse ``replicates`` × ``items`` × ``bytes_per_item`` past :data:`MAX_BLOCK_BYTES`."""
    need = int(replicates) * int(items) * int(bytes_per_item)
    if need > MAX_BLOCK_BYTES:
        most = MAX_BLOCK_BYTES // max(1, int(items) * int(bytes_per_item))
        raise InvalidParameterError(
            f"Invalid replicates: {replicates} of a block of {items} items would need about "
            f"{need / 2**30:.1f} GiB, more than the {MAX_BLOCK_BYTES / 2**30:g} GiB allowed "
            f"(MAX_BLOCK_BYTES); the largest allowed here is {most} replicates"
        )


@dataclass(frozen=True)
class QueryPlan:
    """One measured query at one geolevel: what is simulated of it and its noise."""

    name: str
    n_cells: int  # cells of the full marginal
    n_sim: int  # cells simulated: the first n_sim of the marginal
    sigma2: float  # discrete Gaussian variance parameter of each cell's noise (or NoiseVariance)

    def __post_init__(self) -> None:
        if not 1 <= self.n_sim <= self.n_cells:
            raise InvalidParameterError(
                f"Invalid n_sim {self.n_sim} for query {self.name!r} with {self.n_cells} cells"
            )
        if not (np.isfinite(self.sigma2) and self.sigma2 > 0):
            raise InvalidParameterError(f"Invalid sigma2: {self.sigma2} for query {self.name!r}")


def cell_shares(
    n_cells: int, n_sim: int, concentration: float, rng: np.random.Generator
) -> np.ndarray:
    """Shares of the simulated cells plus, last, the lumped share of all other cells."""
    if concentration <= 0:
        raise InvalidParameterError(f"Invalid concentration: {concentration}; must be > 0")
    alpha = np.full(n_sim + 1, concentration)
    alpha[-1] = concentration * (n_cells - n_sim) if n_cells > n_sim else 1e-300
    shares = rng.dirichlet(np.maximum(alpha, 1e-3))
    if n_cells == n_sim:
        shares[-1] = 0.0
        shares /= shares.sum()
    return shares


def true_cell_counts(
    unit_pops: np.ndarray, shares: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """True counts (units, n_sim): multinomial in each unit's population, lumped cell dropped."""
    pops = np.asarray(unit_pops)
    if pops.ndim != 1 or (pops < 0).any():
        raise InvalidParameterError("Invalid unit populations: need a 1-D array of counts >= 0")
    counts = rng.multinomial(pops.astype(np.int64), shares)
    return counts[:, :-1].astype(np.int64)


@dataclass(frozen=True)
class ResidualBlock:
    """Residuals of one (state, geolevel) block, items ordered query-major, then unit, then cell."""

    residual: np.ndarray  # (replicates, items) float32
    truth: np.ndarray  # (items,) int32
    query_index: np.ndarray  # (items,) int16: index into the audit's query list
    unit_index: np.ndarray  # (items,) int32: geounit within the state at this level
    cell_index: np.ndarray  # (items,) int32: cell within the query's marginal

    @property
    def n_items(self) -> int:
        return int(self.truth.size)

    @property
    def replicates(self) -> int:
        return int(self.residual.shape[0])

    def items(self, start: int, stop: int) -> ResidualBlock:
        """Items ``[start, stop)`` (views)."""
        return ResidualBlock(
            self.residual[:, start:stop],
            *(getattr(self, n)[start:stop] for n in ITEM_VARIABLES),
        )


#: a block's variables of one value per item, in the order :class:`ResidualBlock` takes them
ITEM_VARIABLES = ("truth", "query_index", "unit_index", "cell_index")


class ResidualItems(Protocol):
    """What a block's writer reads: its items and replicates, and its items in ranges (in
    order): a :class:`ResidualBlock`, a :class:`ResidualParts`, or a block computed as it is read
    (``auditlib.simulate.sparse_release.StreamedParts``)."""

    @property
    def n_items(self) -> int: ...

    @property
    def replicates(self) -> int: ...

    def items(self, start: int, stop: int) -> ResidualBlock: ...


@dataclass(frozen=True)
class ResidualParts:
    """One block held as consecutive parts (each the next items, as a :class:`ResidualBlock`),
    never concatenated: a large block is built and written holding its items once."""

    parts: tuple[ResidualBlock, ...]

    def __post_init__(self) -> None:
        if not self.parts:
            raise InvalidParameterError("Invalid residual parts: give at least one part")
        if len({p.replicates for p in self.parts}) != 1:
            raise InvalidParameterError("Invalid residual parts: each part has every replicate")

    @property
    def n_items(self) -> int:
        return sum(p.n_items for p in self.parts)

    @property
    def replicates(self) -> int:
        return self.parts[0].replicates

    def items(self, start: int, stop: int) -> ResidualBlock:
        """Items ``[start, stop)`` as one block (copied from the parts they lie in)."""
        got, pos = [], 0
        for p in self.parts:
            a, b = max(start - pos, 0), min(stop - pos, p.n_items)
            if a < b:
                got.append(p.items(a, b))
            pos += p.n_items
        if len(got) == 1:
            return got[0]
        if not got:
            return self.parts[0].items(0, 0)
        return ResidualBlock(
            np.concatenate([g.residual for g in got], axis=1),
            *(np.concatenate([getattr(g, n) for g in got]) for n in ITEM_VARIABLES),
        )

    def whole(self) -> ResidualBlock:
        """The block in one piece: its one part, or the parts joined (a copy)."""
        return self.items(0, self.n_items) if len(self.parts) > 1 else self.parts[0]


def simulate_block(
    truths: Sequence[np.ndarray],
    queries: Sequence[QueryPlan],
    query_ids: Sequence[int],
    noise_rngs: Sequence[np.random.Generator],
    postprocess: Postprocess = "none",
) -> ResidualBlock:
    """Simulate one release per generator in ``noise_rngs`` and return the residuals.

    ``truths[j]`` holds the true counts (units, n_sim) of ``queries[j]``; ``query_ids[j]`` is its
    index in the audit's query list.
    """
    if not (len(truths) == len(queries) == len(query_ids)):
        raise InvalidParameterError("truths, queries and query_ids must have the same length")
    if postprocess not in ("none", "nonnegative"):
        raise InvalidParameterError(
            f"Invalid postprocess: {postprocess!r}; allowed: none, nonnegative"
        )
    for t, q in zip(truths, queries, strict=True):
        if t.ndim != 2 or t.shape[1] != q.n_sim:
            raise InvalidParameterError(
                f"Invalid truth shape {t.shape} for query {q.name!r}; expected (units, {q.n_sim})"
            )
        if (t < 0).any():
            raise InvalidParameterError(f"Negative true counts for query {q.name!r}")
    truth = np.concatenate([t.ravel() for t in truths]).astype(np.int64)
    qidx = np.concatenate(
        [np.full(t.size, i, dtype=np.int16) for t, i in zip(truths, query_ids, strict=True)]
    )
    unit = np.concatenate(
        [np.repeat(np.arange(t.shape[0], dtype=np.int32), t.shape[1]) for t in truths]
    )
    cell = np.concatenate(
        [np.tile(np.arange(t.shape[1], dtype=np.int32), t.shape[0]) for t in truths]
    )
    check_block_size(len(noise_rngs), truth.size)
    mechs = [noise_sampler(q.sigma2) for q in queries]  # discrete Gaussian, or the file's noise
    residual = np.empty((len(noise_rngs), truth.size), dtype=np.float32)
    for r, g in enumerate(noise_rngs):
        noise = np.concatenate(
            [m.rvs(size=t.size, rng=g) for m, t in zip(mechs, truths, strict=True)]
        )
        dp = truth + noise
        if postprocess == "nonnegative":
            np.maximum(dp, 0, out=dp)
        residual[r] = dp - truth
    return ResidualBlock(
        residual=residual,
        truth=truth.astype(np.int32),
        query_index=qidx,
        unit_index=unit,
        cell_index=cell,
    )
