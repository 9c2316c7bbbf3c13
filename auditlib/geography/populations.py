"""Per-block histograms: every block's population split over the detailed cells of an attribute schema.

Model (three nested Dirichlet draws, then a multinomial; ``Dir(c·p)`` has mean ``p``):

1. **State shares** ``p_state ~ Dir(c_state · p₀)`` around a national mean ``p₀`` (:func:`national_shares`:
   for ``"pl94"`` the product of the published 2020 national marginals, uniform otherwise).
2. **Group (e.g. county) shares** ``p_g ~ Dir(c_group · p_state)`` for every group of blocks.
3. **Block shares** ``q_b ~ Dir(c_block · p_g)``; a small ``c_block`` makes blocks *segregated*: each
   block's people concentrate in a few cells and most cells of a block are empty.
4. **Counts** ``h_b ~ Multinomial(n_b, q_b)``: rows sum exactly to the block populations.

Marginally ``E[h_b] = n_b · p_state`` given the state shares; between blocks the counts are
over-dispersed (Dirichlet–multinomial). Dirichlet draws are normalized Gamma draws, computed in chunks of
blocks (memory ∝ chunk × cells); the multinomials of a chunk are one call of numpy's row-wise
sampler. No Python loop runs over blocks.

The ``"pl94"`` national mean treats voting age, Hispanic origin and race as independent; in reality
they are associated (e.g. "some other race" is mostly Hispanic), which this model does not reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from auditlib import seeds
from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import AttributeSchema
from auditlib.geography.spine import LEVELS as SPINE_LEVELS
from auditlib.geography.spine import Spine
from auditlib.geography.synthetic import (
    PopulationParams,
    SyntheticHierarchy,
    state_level_populations,
)
from auditlib.mechanisms.base import check_rng

#: keyed stream of one spine state's histograms: (BLOCK_HISTOGRAMS, state index)
BLOCK_HISTOGRAMS = 30
#: keyed stream of one synthetic-hierarchy state's histograms: (SYNTHETIC_HISTOGRAMS, state)
SYNTHETIC_HISTOGRAMS = 31

#: 2020 Census PL94-171 national counts (total 331,449,281), for the ``"pl94"`` mean shares
PL94_2020_NATIONAL: dict[str, dict[str, int]] = {
    "votingage": {"under18": 73_106_000, "18plus": 258_343_281},
    "hispanic": {"not_hispanic": 269_369_237, "hispanic": 62_080_044},
    "race": {
        "white": 204_277_273,
        "black": 41_104_200,
        "aian": 3_727_135,
        "asian": 19_886_049,
        "nhpi": 689_966,
        "sor": 27_915_715,
        "two_or_more": 33_848_943,
    },
}


@dataclass(frozen=True)
class HistogramModel:
    """Concentrations of the nested Dirichlet draws (larger = closer to the level above)."""

    state_concentration: float = 200.0
    group_concentration: float = 30.0
    block_concentration: float = 1.0
    chunk_blocks: int = 1 << 16  # blocks per chunk: memory ≈ chunk × cells × 16 bytes

    def __post_init__(self) -> None:
        for name in ("state_concentration", "group_concentration", "block_concentration"):
            v = getattr(self, name)
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not (np.isfinite(v) and v > 0)
            ):
                raise InvalidParameterError(
                    f"Invalid {name}: {v!r}; it must be a finite number > 0"
                )
        c = self.chunk_blocks
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise InvalidParameterError(f"Invalid chunk_blocks: {c!r}; it must be an integer >= 1")


def national_shares(schema: AttributeSchema) -> npt.NDArray[np.float64]:
    """Mean cell shares: 2020 national marginals multiplied (``"pl94"``), else uniform."""
    if schema.attribute_names and all(
        a.name in PL94_2020_NATIONAL and set(a.levels) == set(PL94_2020_NATIONAL[a.name])
        for a in schema.attributes
    ):
        p = np.ones(1)
        for a in schema.attributes:
            counts = np.array([PL94_2020_NATIONAL[a.name][lv] for lv in a.levels], dtype=np.float64)
            p = np.multiply.outer(p, counts / counts.sum()).ravel()
        return p
    return np.full(schema.n_cells, 1.0 / schema.n_cells)


def check_populations(
    block_population: npt.ArrayLike, what: str = "block_population"
) -> npt.NDArray[np.int64]:
    """A 1-D array of non-negative integer counts, or an error naming the first bad entry."""
    a = np.asarray(block_population)
    if a.ndim != 1:
        raise InvalidParameterError(
            f"Invalid {what}: shape {a.shape}; give one count per unit (a 1-D array)"
        )
    if a.dtype.kind == "b" or a.dtype.kind not in "iuf":
        raise InvalidParameterError(
            f"Invalid {what}: dtype {a.dtype}; give non-negative integer counts"
        )
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.round(a))
        if bad.any():
            i = int(np.argmax(bad))
            raise InvalidParameterError(
                f"Invalid {what}[{i}] = {a[i].item()!r}; counts must be whole numbers"
            )
    if a.size and a.min() < 0:
        i = int(np.argmin(a))
        raise InvalidParameterError(
            f"Invalid {what}[{i}] = {a[i].item()!r}; populations must be >= 0"
        )
    return a.astype(np.int64)


def _dirichlet_rows(
    rng: np.random.Generator, alpha: npt.NDArray[np.float64], fallback: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """One Dirichlet draw per row of ``alpha`` (normalized Gammas); a row whose Gammas all underflow
    to 0 (only with tiny concentrations) takes its ``fallback`` row instead."""
    g = rng.standard_gamma(alpha)
    s = g.sum(axis=-1, keepdims=True)
    ok = s[..., 0] > 0
    out = np.where(ok[..., None], g / np.where(s > 0, s, 1.0), fallback)
    return out


def multinomial_rows(
    rng: np.random.Generator, n: npt.NDArray[np.int64], p: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """``Multinomial(n_b, p_b)`` for every row b (numpy's vectorized sampler; rows renormalized so
    that float dust cannot trip its ``Σp ≤ 1`` check). Every row sums exactly to ``n_b``."""
    q = p / p.sum(axis=1, keepdims=True)
    return rng.multinomial(n.astype(np.int64), q).astype(np.int64)


def block_histograms(
    block_population: npt.ArrayLike,
    schema: AttributeSchema,
    rng: np.random.Generator,
    *,
    groups: npt.ArrayLike | None = None,
    shares: npt.ArrayLike | None = None,
    model: HistogramModel | None = None,
) -> npt.NDArray[np.int32]:
    """Histograms ``(n_blocks, schema.n_cells)`` (int32) whose rows sum to the block populations.

    ``groups`` (optional, one int per block in ``0..G−1``, e.g. the county) gets one share vector per
    group; ``shares`` (optional) fixes the state's share vector instead of drawing it around
    :func:`national_shares`. See the module docstring for the model.
    """
    model = model or HistogramModel()
    check_rng(rng)
    if not isinstance(schema, AttributeSchema):
        raise InvalidParameterError(
            f"Invalid schema {schema!r}; give an AttributeSchema (auditlib.geography.schema.schema)"
        )
    pop = check_populations(block_population)
    if pop.size and pop.max() > np.iinfo(np.int32).max:
        raise InvalidParameterError(
            f"Invalid block_population: max {pop.max()} does not fit int32 histograms"
        )
    n, k = pop.size, schema.n_cells
    if shares is None:
        p_state = _dirichlet_rows(
            rng,
            model.state_concentration * national_shares(schema)[None, :],
            national_shares(schema)[None, :],
        )[0]
    else:
        p_state = np.asarray(shares, dtype=np.float64)
        if p_state.shape != (k,) or not np.all(np.isfinite(p_state)) or p_state.min() < 0:
            raise InvalidParameterError(
                f"Invalid shares of shape {p_state.shape}; give {k} finite non-negative numbers"
            )
        if not p_state.sum() > 0:
            raise InvalidParameterError("Invalid shares: they sum to 0; give a positive total")
        p_state = p_state / p_state.sum()
    if groups is None:
        group = np.zeros(n, dtype=np.int64)
        n_groups = 1
    else:
        group = np.asarray(groups)
        if group.shape != (n,) or group.dtype.kind not in "iu":
            raise InvalidParameterError(
                f"Invalid groups: shape {group.shape}, dtype {group.dtype}; give one integer per block"
            )
        if n and group.min() < 0:
            raise InvalidParameterError(f"Invalid groups: {group.min()} < 0; groups are 0..G-1")
        group = group.astype(np.int64)
        n_groups = int(group.max()) + 1 if n else 0
    p_group = _dirichlet_rows(
        rng,
        np.broadcast_to(model.group_concentration * p_state, (n_groups, k)),
        np.broadcast_to(p_state, (n_groups, k)),
    )
    out = np.empty((n, k), dtype=np.int32)
    step = model.chunk_blocks
    for a in range(0, n, step):
        b = min(a + step, n)
        mean = p_group[group[a:b]]
        q = _dirichlet_rows(rng, model.block_concentration * mean, mean)
        out[a:b] = multinomial_rows(rng, pop[a:b], q)
    return out


def spine_state_histograms(
    spine: Spine,
    state: int,
    schema: AttributeSchema,
    seed: int,
    *,
    model: HistogramModel | None = None,
) -> npt.NDArray[np.int32]:
    """Histograms of the blocks of one spine state (0-based), one share vector per county.

    Drawn from the keyed stream ``(BLOCK_HISTOGRAMS, state)``: a state's histograms do not depend on
    which other states are computed, or where. Blocks are in spine order (contiguous per state).
    """
    if (
        isinstance(state, bool)
        or not isinstance(state, int | np.integer)
        or not 0 <= state < spine.n_states
    ):
        raise InvalidParameterError(
            f"Invalid state: {state!r}; the spine has states 0..{spine.n_states - 1}"
        )
    block_state = spine.state_of("Block")
    lo, hi = np.searchsorted(block_state, [state, state + 1])
    county = np.arange(lo, hi, dtype=np.int64)
    for level in reversed(SPINE_LEVELS[2:]):  # Block -> Block_Group -> Tract -> County
        county = spine.parents[level][county].astype(np.int64)
    county -= county.min() if county.size else 0
    rng = seeds.rng(seed, BLOCK_HISTOGRAMS, int(state))
    return block_histograms(spine.block_population[lo:hi], schema, rng, groups=county, model=model)


def synthetic_state_histograms(
    hierarchy: SyntheticHierarchy,
    params: PopulationParams,
    state: int,
    schema: AttributeSchema,
    *,
    model: HistogramModel | None = None,
) -> npt.NDArray[np.int32]:
    """Histograms of the bottom-level units of one state (1-based) of a :class:`SyntheticHierarchy`,
    one share vector per unit of the first level below State; rows sum to
    :func:`~auditlib.geography.synthetic.state_level_populations`. Stream
    ``(SYNTHETIC_HISTOGRAMS, state)`` of ``params.seed``."""
    levels = state_level_populations(hierarchy, params, state)
    below = hierarchy.below_state
    pops = levels[below[-1]] if below else levels["State"]
    groups = None
    if below:
        per_group = pops.size // hierarchy.units_per_state(below[0])
        groups = np.arange(pops.size, dtype=np.int64) // per_group
    rng = seeds.rng(params.seed, SYNTHETIC_HISTOGRAMS, int(state))
    return block_histograms(pops, schema, rng, groups=groups, model=model)


def synthetic_state_population(
    hierarchy: SyntheticHierarchy,
    params: PopulationParams,
    state: int,
    schema: AttributeSchema,
    *,
    model: HistogramModel | None = None,
) -> npt.NDArray[np.int64]:
    """The bottom-level histograms ``(n_units, schema.n_cells)`` of one state (1-based) of a
    :class:`SyntheticHierarchy`, as an audit of that hierarchy draws them: the block populations
    (:func:`~auditlib.geography.synthetic.state_level_populations`) for a one-cell schema,
    :func:`synthetic_state_histograms` otherwise."""
    if schema.n_cells == 1:
        levels = state_level_populations(hierarchy, params, state)
        below = hierarchy.below_state
        return np.asarray(levels[below[-1] if below else "State"], dtype=np.int64)[:, None]
    return synthetic_state_histograms(hierarchy, params, state, schema, model=model).astype(
        np.int64
    )
