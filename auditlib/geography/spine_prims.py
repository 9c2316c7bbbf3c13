"""The DHC's Prim and Tract_Subset_Group levels, drawn on the synthetic spine's counties and tracts.

The DHC production spine runs State → County → Prim → Tract_Subset_Group → Tract_Subset →
Block_Group → Block. In the Bureau's DAS (``uscensusbureau/DAS_2020_DHC_Production_Code``, commit
38ea5f2, ``das_decennial/programs/geographic_spines``) a **Prim** is a county ∩ functioning county
subdivision ∩ incorporated place, from a crosswalk that is not public (``define_spines.py``
``create_prims``, L12–22; in Puerto Rico the Prims are the counties), a **Tract_Subset** is a tract
∩ a Prim, and within each Prim the tract subsets, sorted by their code, are cut into consecutive
**Tract_Subset_Groups** of ``cutoff = int(√n + fanout_cutoff + 1)`` members, ``n`` the tract
subsets of the Prim (``optimize_spine.py`` ``call_optimize_prim_spine``, L712–809, grouping by
``group_elements_orig``, L23–24: ``elements[k·cutoff:(k+1)·cutoff]``; ``fanout_cutoff = 12`` and
``group_type = 'orig'`` are the code's defaults, ``reader/table_reader.py`` L637–640).

Here, per county of ``T`` tracts (in the spine's order; a stand-in, drawn, not the real geography):

1. **Prims**: ``P = min(T, 1 + Poisson(2·√T))`` (an assumption: Los Angeles County, ≈ 2,500 tracts,
   has 88 cities and the unincorporated balance, ≈ 89 Prims; an average county of 27 tracts gets
   about 11); Puerto Rico's counties are one Prim each, as the DAS's.
2. **Prim sizes** in tracts: ``1 + Multinomial(T − P, w)``, ``w ∝ Gamma(0.5)`` (skewed: one large
   balance and small places); each Prim is a contiguous run of the county's tracts.
3. **Tract_Subset_Groups**: exactly the DAS's rule above, on the Prim's tracts in order.

Departures, stated: a Tract_Subset is a whole spine tract (the real ones split tracts at Prim
boundaries, so there are more tract subsets than tracts); the DAS's spine optimization after the
grouping (``optimize_spine``'s bypassing of single-child geounits, ``bypassing_improves_parent``
L363–390) is not reproduced, so a Prim of one group keeps it.

Measured on the benchmarks' spine seed (``generate_spine(20200325)``, the US: 3,143 counties, 84,414
tracts; its S41 holds a county of 4,391 tracts): 25,083 Prims and 26,013 Tract_Subset_Groups; largest
fan-outs County → Prim 138, Prim → Tract_Subset_Group 9, Tract_Subset_Group → Tract 28 (a Prim of
246 tracts: the DAS's ``int(√n + 13)``). Seed 7: 25,116 and 25,956; 67, 6 and 24. These counts are
drawn here, not published: the Bureau has published no count of Prims or Tract_Subset_Groups.
Deriving them for the US takes 7–29 ms on a loaded 2-core machine (benchmarks/README.md).

Every step is vectorized over counties, Prims and tracts (no Python loop).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from auditlib.exceptions import InvalidParameterError

#: the DAS's ``fanout_cutoff`` (``reader/table_reader.py`` default): a Prim's tract subsets are cut
#: into groups of ``int(√n + FANOUT_CUTOFF + 1)``
FANOUT_CUTOFF = 12
#: Prims per county: ``1 + Poisson(PRIMS_PER_ROOT_TRACT · √T)``, at most ``T``
PRIMS_PER_ROOT_TRACT = 2.0
#: shape of the Gamma weights that split a county's tracts among its Prims
PRIM_SIZE_SHAPE = 0.5

IntArray = npt.NDArray[np.int64]


def tsg_cutoff(n: npt.ArrayLike) -> IntArray:
    """Tract subsets per Tract_Subset_Group of a Prim of ``n`` tract subsets, the DAS's
    ``int(np.sqrt(n) + fanout_cutoff + 1)`` (``call_optimize_prim_spine``)."""
    return (np.sqrt(np.asarray(n, dtype=np.float64)) + FANOUT_CUTOFF + 1).astype(np.int64)


def draw_prims(
    tract_county: npt.ArrayLike,
    n_counties: int,
    rng: np.random.Generator,
    *,
    one_per_county: bool = False,
) -> tuple[IntArray, IntArray]:
    """``(prim_county, tract_prim)``: the county of every Prim and the Prim of every tract
    (``tract_county`` sorted, every county with a tract), steps 1–2 of the module docstring;
    ``one_per_county``: every county one Prim (Puerto Rico's)."""
    county = np.asarray(tract_county, dtype=np.int64)
    if county.size and (np.diff(county) < 0).any():
        raise InvalidParameterError("Invalid tract_county: tracts must be sorted by county")
    t = np.bincount(county, minlength=n_counties)
    if t.size != n_counties or (t == 0).any():
        raise InvalidParameterError(
            f"Invalid tract_county: need every county 0..{n_counties - 1} to hold a tract"
        )
    if one_per_county:
        return np.arange(n_counties, dtype=np.int64), county.copy()
    p = np.minimum(t, 1 + rng.poisson(PRIMS_PER_ROOT_TRACT * np.sqrt(t)))
    prim_county = np.repeat(np.arange(n_counties, dtype=np.int64), p)
    w = np.maximum(rng.gamma(PRIM_SIZE_SHAPE, size=prim_county.size), np.finfo(np.float64).tiny)
    # each county's cumulative shares, offset by its index: county c's Prims cover (c, c + 1]
    first = np.cumsum(p) - p
    cum = np.cumsum(w)
    before = np.repeat(cum[first] - w[first], p)
    total = np.repeat(cum[first + p - 1] - cum[first] + w[first], p)
    key = prim_county + np.minimum((cum - before) / total, 1.0)
    key[first + p - 1] = np.arange(1, n_counties + 1)  # each county's last share exactly 1
    # the T − P tracts beyond one per Prim, each to a Prim of its county with probability w
    extra = np.repeat(np.arange(n_counties, dtype=np.int64), t - p)
    u = 1.0 - rng.random(extra.size)  # (0, 1]
    at = np.searchsorted(key, extra + u, side="left")
    sizes = 1 + np.bincount(at, minlength=prim_county.size)
    return prim_county, np.repeat(np.arange(prim_county.size, dtype=np.int64), sizes)


def group_tracts(tract_prim: npt.ArrayLike, n_prims: int) -> tuple[IntArray, IntArray]:
    """``(tsg_prim, tract_tsg)``: the Prim of every Tract_Subset_Group and the group of every
    tract, the DAS's ``group_elements_orig`` with :func:`tsg_cutoff` on each Prim's tracts in
    order (``tract_prim`` sorted, every Prim with a tract)."""
    prim = np.asarray(tract_prim, dtype=np.int64)
    n = np.bincount(prim, minlength=n_prims)
    if n.size != n_prims or (n == 0).any() or (np.diff(prim) < 0).any():
        raise InvalidParameterError(
            f"Invalid tract_prim: need tracts sorted by Prim, every Prim 0..{n_prims - 1} with one"
        )
    cut = tsg_cutoff(n)
    groups = -(-n // cut)  # ceil(n / cutoff)
    position = np.arange(prim.size, dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    tract_tsg = np.repeat(np.cumsum(groups) - groups, n) + position // cut[prim]
    tsg_prim = np.repeat(np.arange(n_prims, dtype=np.int64), groups)
    return tsg_prim, tract_tsg


def prim_parents(
    tract_county: npt.ArrayLike,
    n_counties: int,
    rng: np.random.Generator,
    *,
    one_per_county: bool = False,
) -> dict[str, IntArray]:
    """The three links the Prim levels add: ``{"Prim": county of each Prim, "Tract_Subset_Group":
    Prim of each group, "Tract": group of each tract}`` (each sorted, every parent with a child)."""
    prim_county, tract_prim = draw_prims(
        tract_county, n_counties, rng, one_per_county=one_per_county
    )
    tsg_prim, tract_tsg = group_tracts(tract_prim, prim_county.size)
    return {"Prim": prim_county, "Tract_Subset_Group": tsg_prim, "Tract": tract_tsg}
