"""Levels and recodes of the Census Bureau's 2020 production histograms, as its DAS defines them.

Plain data (names and index groups, no schema objects), transcribed from the DAS source
(``das_decennial/programs/schema/attributes/*.py`` of uscensusbureau/DAS_2020_DHC_Production_Code;
the same attributes ship in DAS_2020_Redistricting_Production_Code): level order is the DAS's, so a
cell index here is the DAS's cell index.

* PL94-171 persons (``SCHEMA_PL94_2020``): hhgq (8) × votingage (2) × hispanic (2) × cenrace (63).
* DHC persons (``SCHEMA_DHCP``): relgq (42) × sex (2) × age (116) × hispanic (2) × cenrace (63).

A *recode* groups an attribute's levels (the DAS's ``recode…`` methods): ``(name, groups, labels)``
with ``groups[g]`` the level indices of group ``g``, in the DAS's group order. Only the recodes the
shipped production allocations measure are listed; each partitions its attribute's levels.
"""

from __future__ import annotations

from itertools import combinations

RecodeSpec = tuple[str, tuple[tuple[int, ...], ...], tuple[str, ...]]

#: the six races of the 2020 Census, in the DAS's order (``CenraceAttr``)
RACES = ("white", "black", "aian", "asian", "nhopi", "sor")

#: the 63 non-empty combinations of the six races: by number of races, then in race order
#: (``CenraceAttr.getLevels``: 0 ``white`` … 6 ``white-black`` … 62 ``white-black-aian-asian-nhopi-sor``)
CENRACE_LEVELS = tuple(
    "-".join(combo) for k in range(1, len(RACES) + 1) for combo in combinations(RACES, k)
)

#: ``HHGQPersonSimpleAttr``: household and the seven major group-quarters types
HHGQ_LEVELS = (
    "household",
    "correctional_adults",  # GQ 101-106
    "juvenile",  # GQ 201-203
    "nursing",  # GQ 301
    "other_institutional",  # GQ 401-405
    "college_housing",  # GQ 501
    "military",  # GQ 601-602
    "other_noninstitutional",  # GQ 701-702, 704, 706, 801-802, 900-901, 903-904
)
#: HHGQ levels that are institutional group quarters (``recodeInstLevels``)
HHGQ_INSTITUTIONAL = (1, 2, 3, 4)
HHGQ_NONINSTITUTIONAL = (5, 6, 7)

HHGQ_RECODES: tuple[RecodeSpec, ...] = (
    (
        "hhinstlevels",  # recodeHHnstLevels
        ((0,), HHGQ_INSTITUTIONAL, HHGQ_NONINSTITUTIONAL),
        ("household", "institutional", "noninstitutional"),
    ),
)

VOTINGAGE_LEVELS = ("under18", "18plus")
HISPANIC_LEVELS = ("not_hispanic", "hispanic")
SEX_LEVELS = ("male", "female")
#: single years 0 … 115 (115 = 115 and over)
AGE_LEVELS = tuple(str(a) for a in range(116))

#: ``RelGQAttr``: 18 relationships to the householder, then 24 group-quarters types
RELGQ_LEVELS = (
    "householder_alone",
    "householder_not_alone",
    "opposite_sex_spouse",
    "opposite_sex_partner",
    "same_sex_spouse",
    "same_sex_partner",
    "biological_child",
    "adopted_child",
    "stepchild",
    "sibling",
    "parent",
    "grandchild",
    "parent_in_law",
    "child_in_law",
    "other_relative",
    "roommate",
    "foster_child",
    "other_nonrelative",
    "gq101_federal_detention",
    "gq102_federal_prison",
    "gq103_state_prison",
    "gq104_local_jail",
    "gq105_correctional_residential",
    "gq106_military_disciplinary",
    "gq201_juvenile_group_home",
    "gq202_juvenile_treatment",
    "gq203_juvenile_correctional",
    "gq301_nursing",
    "gq401_mental_hospital",
    "gq402_hospital",
    "gq403_hospice",
    "gq404_military_treatment",
    "gq405_residential_school",
    "gq501_college_housing",
    "gq601_military_quarters",
    "gq602_military_ships",
    "gq701_shelter",
    "gq801_adult_group_home",
    "gq802_adult_treatment",
    "gq900_maritime_vessel",
    "gq901_workers_quarters",
    "gq997_other_noninstitutional",
)
#: first RELGQ level that is a group quarters type
RELGQ_FIRST_GQ = 18
#: the PL94 HHGQ level (1..7) of each RELGQ group-quarters level 18..41 (``recode_RELGQ_DHCP_P15_1``)
RELGQ_GQ_TO_HHGQ = (1,) * 6 + (2,) * 3 + (3,) + (4,) * 5 + (5,) + (6,) * 2 + (7,) * 6


def _singles(n: int) -> tuple[tuple[int, ...], ...]:
    return tuple((i,) for i in range(n))


RELGQ_RECODES: tuple[RecodeSpec, ...] = (
    (
        "relgq_4_groups",  # recodeRELGQ_4_Groups
        ((0, 1), tuple(range(2, 18)), tuple(range(18, 33)), tuple(range(33, 42))),
        ("householder", "non_householder", "institutional", "noninstitutional"),
    ),
    (
        "gq_constr_groups",  # recode_GQ_CONSTR_GROUPS (groups in the DAS's order, not sorted)
        (
            tuple(range(18)),
            (32,),
            tuple(range(18, 23)),
            (33, *range(37, 42)),
            (23, 31, 34, 35),
            (*range(24, 31), 36),
        ),
        (
            "household",
            "gq_age_lt3_constrained",
            "gq_age_lt15_constrained",
            "gq_age_lt16_constrained",
            "gq_age_lt17_constrained",
            "gq_unconstrained",
        ),
    ),
    (
        "popSehsdTargetsRelship",  # recode_POP_SEHSD_Targets_RELSHIP
        (*_singles(18), tuple(range(18, 42))),
        (*RELGQ_LEVELS[:18], "in_gq"),
    ),
    (
        "relship_and_eight_level_GQ",  # recode_relship_and_eight_level_GQ
        (
            *_singles(18),
            tuple(range(18, 24)),
            (24, 25, 26),
            (27,),
            tuple(range(28, 33)),
            (33,),
            (34, 35),
            tuple(range(36, 42)),
        ),
        (*RELGQ_LEVELS[:18], *HHGQ_LEVELS[1:]),
    ),
)


def _age_ranges(bounds: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Consecutive age groups starting at each bound (the last one ends at 115)."""
    ends = (*bounds[1:], 116)
    return tuple(tuple(range(a, b)) for a, b in zip(bounds, ends, strict=True))


def _age_labels(groups: tuple[tuple[int, ...], ...]) -> tuple[str, ...]:
    return tuple(str(g[0]) if len(g) == 1 else f"{g[0]}to{g[-1]}" for g in groups)


_AGE_38 = (*range(15), 15, 18, 20, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85, 90)
_AGE_38 = (*_AGE_38, 95, 100, 105, 110)
_AGE_40 = (*range(18), 18, 20, 25, 30, 35, 40, 45, 50, 55, 60, 62, 65, 67, 70, 75, 80, 85, 90, 95)
_AGE_40 = (*_AGE_40, 100, 105, 110)

AGE_RECODES: tuple[RecodeSpec, ...] = tuple(
    (name, groups, _age_labels(groups))
    for name, groups in (
        ("age_18_64_116", _age_ranges((0, 18, 65))),  # recodeAge18_64_116
        ("age_10_groups", _age_ranges((0, 3, 15, 16, 17, 18, 20, 25, 30, 35))),  # recodeAge10groups
        ("age_38_groups", _age_ranges(_AGE_38)),  # recodeAge38groups
        ("age_40_groups", _age_ranges(_AGE_40)),  # recodeAge40groups
    )
)

#: The DHC persons' relgq × age structural zeros (``Constraints_DHCP.py``,
#: ``ConstraintsCreatorDHCGeneric.relgq*_lt*`` / ``*_gt*``): ``(constraint, relgq, first allowed
#: age, last allowed age)``; no person of that relgq level outside those ages. The age sets are the
#: DAS's recodes (``age.py``: ``lt15`` = 0–14, ``gt89`` = 90–115, ``lt17gt65`` = 0–16 and 66–115, …).
DHCP_AGE_STRUCTURAL_ZEROS: tuple[tuple[str, int, int, int], ...] = (
    *((f"relgq{r}_lt15", r, 15, 115) for r in range(6)),
    *((f"relgq{r}_gt89", r, 0, 89) for r in (6, 7, 8)),
    ("relgq10_lt30", 10, 30, 115),
    ("relgq11_gt74", 11, 0, 74),
    ("relgq12_lt30", 12, 30, 115),
    ("relgq13_lt15_gt89", 13, 15, 89),
    ("relgq16_gt20", 16, 0, 20),
    *((f"relgq{r}_lt15", r, 15, 115) for r in range(18, 23)),
    ("relgq23_lt17_gt65", 23, 17, 65),
    *((f"relgq{r}_gt25", r, 0, 25) for r in (24, 25, 26)),
    ("relgq27_lt20", 27, 20, 115),
    ("relgq31_lt17_gt65", 31, 17, 65),
    ("relgq32_lt3_gt30", 32, 3, 30),
    ("relgq33_lt16_gt65", 33, 16, 65),
    ("relgq34_lt17_gt65", 34, 17, 65),
    ("relgq35_lt17_gt65", 35, 17, 65),
    ("relgq37_lt16", 37, 16, 115),
    ("relgq38_lt16", 38, 16, 115),
    ("relgq39_lt16_gt75", 39, 16, 75),
    ("relgq40_lt16_gt75", 40, 16, 75),
)


def _relgq_age_range() -> tuple[tuple[int, int], ...]:
    out = [(0, 115)] * len(RELGQ_LEVELS)
    for _, r, lo, hi in DHCP_AGE_STRUCTURAL_ZEROS:
        out[r] = (lo, hi)
    return tuple(out)


#: the ages each relgq level may hold, ``(first, last)`` (:data:`DHCP_AGE_STRUCTURAL_ZEROS`)
RELGQ_AGE_RANGE = _relgq_age_range()
#: PL94's ``nurse_nva_0`` (``Constraints_PL94.py``): no one under 18 (votingage 0) in hhgq 3 (nursing)
PL94_NURSING_HHGQ = 3
