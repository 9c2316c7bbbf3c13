"""D′ from D for block-histogram populations (synthetic, spine, table; total and pl94 schemas).

Reference: the counts of every (level, query) of D and D′ recomputed by brute force (a Python
walk up the parents of every block, then the query as a sum over its detailed cells by label);
their difference must be ±1 exactly where :meth:`HistogramPair.count_difference` says, 0 elsewhere.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from auditlib.exceptions import InvalidParameterError
from auditlib.geography.schema import schema
from auditlib.geography.spine import LEVELS, generate_spine, tallies_2020
from auditlib.geography.synthetic import PopulationParams, SyntheticHierarchy
from auditlib.geography.tabular import read_counts
from auditlib.simulate.neighbours_hist import (
    HistogramDatabase,
    HistogramPair,
    accounting_components,
    add_person,
    move_person,
    neighbour,
    remove_person,
)


def _brute_counts(db: HistogramDatabase, level: int, query: str) -> dict[tuple[int, int], int]:
    """{(unit, query cell): count} by walking every block up and summing cells by label."""
    sch = db.schema
    attrs = sch.query_attributes(query)
    idx = [sch.attribute_names.index(a) for a in attrs]
    qlabels = sch.cell_labels(query)
    out: dict[tuple[int, int], int] = {}
    for b in range(db.n_blocks):
        u = b
        for j in range(len(db.levels) - 2, level - 1, -1):
            u = int(db.parents[j][u])
        for c, label in enumerate(sch.cell_labels("detailed")):
            parts = label.split("/")
            q = "/".join(parts[i] for i in idx) if idx else "total"
            key = (u, qlabels.index(q))
            out[key] = out.get(key, 0) + int(db.histograms[b, c])
    return out


def _check_pair(pair: HistogramPair, queries: tuple[str, ...]) -> None:
    for level in range(len(pair.d.levels)):
        for q in queries:
            a, b = _brute_counts(pair.d, level, q), _brute_counts(pair.d_prime, level, q)
            diff = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
            diff = {k: v for k, v in diff.items() if v}
            assert diff == pair.count_difference(level, q), (level, q)
            assert all(abs(v) == 1 for v in diff.values())
            assert len(diff) <= 2
            if pair.change.kind == "move" and q == "total":  # the top level's total is kept
                assert level > 0 or not diff or len(pair.states()) == 2
    assert (pair.d_prime.histograms >= 0).all()
    n = int(pair.d_prime.histograms.sum() - pair.d.histograms.sum())
    assert n == {"add": 1, "remove": -1, "move": 0}[pair.change.kind]


@pytest.fixture(scope="module")
def synthetic_pl94() -> HistogramDatabase:
    h = SyntheticHierarchy(("State", "County", "Tract", "Block"), (2, 3, 4), 2)
    return HistogramDatabase.from_synthetic(h, PopulationParams(seed=3), 1, "pl94")


def test_pl94_move_add_remove_change_the_marginals(synthetic_pl94: HistogramDatabase) -> None:
    db = synthetic_pl94
    assert db.levels == ("State", "County", "Tract", "Block") and db.n_blocks == 24
    b, c = map(int, np.argwhere(db.histograms > 0)[0])
    queries = ("total", "votingage", "hispanic * race", "detailed")
    far = db.n_blocks - 1  # another county
    pairs = [
        move_person(db, b, c, far),  # another block, same cell
        move_person(db, b, c, b, "under18/hispanic/black" if c else 1),  # same block, other cell
        move_person(db, b, c, far, 27),  # both
        add_person(db, 5, "18plus/hispanic/white"),
        remove_person(db, b, c),
    ]
    for p in pairs:
        _check_pair(p, queries)
    # a change of cell within a block: no total count of any level moves
    assert all(not pairs[1].count_difference(lv, "total") for lv in range(4))
    assert pairs[0].count_difference("County", "detailed") == {(0, c): -1, (1, c): 1}
    # D is untouched
    assert db.histograms[b, c] == pairs[0].d.histograms[b, c]
    assert pairs[0].d_prime.histograms[b, c] == db.histograms[b, c] - 1


def test_spine_state_and_nation(synthetic_pl94: HistogramDatabase) -> None:
    t = tallies_2020()["US"].scaled(0.0005)
    spine = generate_spine(4, totals={"US": t})
    nation = HistogramDatabase.from_spine(spine)
    assert nation.levels == LEVELS and nation.n_top == spine.n_states
    np.testing.assert_array_equal(
        nation.query_counts("County")[:, 0], spine.populations()["County"]
    )
    blocks = np.flatnonzero(spine.block_population > 0)
    src = int(blocks[0])
    dst = int(blocks[-1])  # the last state
    pair = move_person(nation, src, 0, dst)
    assert pair.states() == (int(spine.state_of("Block")[src]), spine.n_states - 1)
    for level in range(len(LEVELS)):
        d = pair.count_difference(level)
        ref = {}
        for g, s in ((src, -1), (dst, 1)):
            u = int(nation.unit_of_block(g, level))
            ref[(u, 0)] = ref.get((u, 0), 0) + s
        assert d == {k: v for k, v in ref.items() if v}
        pops = [p.query_counts(level)[:, 0] for p in (pair.d, pair.d_prime)]
        changed = np.flatnonzero(pops[1] != pops[0])
        assert sorted(changed.tolist()) == sorted(u for u, _ in d)
    # cut to one state: the move is a removal there and an addition in the other
    last = spine.n_states - 1
    one = pair.state(last)
    assert one.change.kind == "add" and one.d.n_top == 1
    assert one.d.n_blocks == int((spine.state_of("Block") == last).sum())
    np.testing.assert_array_equal(
        one.d.histograms[:, 0], spine.block_population[spine.state_of("Block") == last]
    )
    _check_pair(one, ("total",))
    first = pair.state(pair.states()[0])
    assert first.change.kind == "remove"
    with pytest.raises(InvalidParameterError, match="touches states"):
        pair.state(1 if pair.states()[0] != 1 else 2)
    # a pl94 state of the spine: rows sum to the block populations
    s3 = HistogramDatabase.from_spine(spine, "pl94", seed=1, state=3)
    assert s3.histograms.shape[1] == 28 and s3.n_top == 1
    np.testing.assert_array_equal(
        s3.histograms.sum(axis=1), spine.block_population[spine.state_of("Block") == 3]
    )


def test_table_population() -> None:
    frame = pd.DataFrame(
        {
            "state": ["A", "A", "A", "B", "B"],
            "county": ["a1", "a2", "a3", "b1", "b2"],
            "white": [5, 0, 2, 7, 1],
            "black": [1, 3, 0, 0, 4],
        }
    )
    tab = read_counts(frame, ["white", "black"], levels=["state"], unit="county")
    db = HistogramDatabase.from_table(tab)
    assert db.n_top == 2 and db.n_blocks == 5
    pair = move_person(db, 0, "black", 4, "white")  # a1/black -> b2/white
    _check_pair(pair, ("total", "detailed"))
    assert pair.count_difference(0, "detailed") == {(0, 1): -1, (1, 0): 1}
    pair = neighbour(db, "move", block=1, cell=1, other_block=2, other_cell=0)
    assert pair.change.source == (2, 0) and pair.change.target == (1, 1)
    assert pair.count_difference(0, "total") == {}  # same state


def test_bad_input_names_the_value(synthetic_pl94: HistogramDatabase) -> None:
    db = synthetic_pl94
    empty = tuple(map(int, np.argwhere(db.histograms == 0)[0]))
    with pytest.raises(InvalidParameterError, match="Unknown block 24"):
        add_person(db, 24, 0)
    with pytest.raises(InvalidParameterError, match="Unknown cell 'adult/white'"):
        add_person(db, 0, "adult/white")
    with pytest.raises(InvalidParameterError, match="Unknown cell 28"):
        add_person(db, 0, 28)
    with pytest.raises(InvalidParameterError, match=rf"block {empty[0]}, cell {empty[1]} .* empty"):
        remove_person(db, *empty)
    with pytest.raises(InvalidParameterError, match="is empty in D") as err:
        move_person(db, empty[0], empty[1], 0)
    full = np.flatnonzero(db.histograms[empty[0]])  # the error names the block's non-empty cells
    assert full.size == 0 and f"block {empty[0]} is empty; non-empty blocks" in str(err.value)
    b, c = map(int, np.argwhere((db.histograms == 0) & (db.histograms.sum(1) > 0)[:, None])[0])
    with pytest.raises(InvalidParameterError, match="is empty in D") as err:
        remove_person(db, b, c)
    full = np.flatnonzero(db.histograms[b])
    label = db.schema.cell_labels("detailed")[full[0]]
    assert f"non-empty cells of block {b}: {label!r} ({db.histograms[b, full[0]]})" in str(
        err.value
    )
    b, c = map(int, np.argwhere(db.histograms > 0)[0])
    with pytest.raises(InvalidParameterError, match="to itself"):
        move_person(db, b, c, b)
    with pytest.raises(InvalidParameterError, match="Invalid kind 'swap'"):
        neighbour(db, "swap", block=0)
    with pytest.raises(InvalidParameterError, match="Unknown level 'Tract_Subset'"):
        db.query_counts("Tract_Subset")
    with pytest.raises(InvalidParameterError, match="counts must be integers >= 0"):
        HistogramDatabase(db.schema, db.levels, db.parents, db.histograms - 100)
    with pytest.raises(InvalidParameterError, match=r"needs \(n_blocks, 28\)"):
        HistogramDatabase(db.schema, db.levels, db.parents, db.histograms[:, :1])
    with pytest.raises(InvalidParameterError, match="Invalid state 3"):
        HistogramDatabase.from_synthetic(
            SyntheticHierarchy(("State", "Block"), (2,), 2), PopulationParams(seed=1), 3
        )
    assert schema("pl94").n_cells == 28


def test_accounting_components_count_the_changed_measurements(
    synthetic_pl94: HistogramDatabase,
) -> None:
    db = synthetic_pl94
    b, c = map(int, np.argwhere(db.histograms > 0)[0])
    measured = [[("total", 2.0)], [("total", 3.0), ("votingage", 3.0)], [("detailed", 5.0)]]
    measured.append([("detailed", 7.0)])
    move = move_person(db, b, c, db.n_blocks - 1)  # crosses counties: 2 cells change below State
    assert accounting_components(move, measured) == [(3.0, 4), (5.0, 2), (7.0, 2)]
    add = add_person(db, b, c)
    assert accounting_components(add, measured) == [(2.0, 1), (3.0, 2), (5.0, 1), (7.0, 1)]
    with pytest.raises(InvalidParameterError, match="3 levels given"):
        accounting_components(add, measured[:3])
