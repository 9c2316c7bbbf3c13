"""Cost of store integrity: block writes with and without their sha256 record, and `verify` speed.

    .venv/bin/python benchmarks/bench_store_integrity.py [BLOCKS] [REPLICATES] [ITEMS]

Writes BLOCKS (state, geolevel) regions of REPLICATES x ITEMS float32 residuals into a local store,
once through ``write_residual_block`` (data + checksums) and once with the data write alone, then
times ``checksums.verify`` over the finished store. Prints the machine first.
"""

from __future__ import annotations

import sys
import tempfile
import time

import numpy as np
from _machine import machine_info

from auditlib.simulate import ResidualBlock
from storage import checksums, residual_blocks, store


def block(rng: np.random.Generator, reps: int, n: int) -> ResidualBlock:
    return ResidualBlock(
        residual=rng.normal(0, 10, (reps, n)).round().astype(np.float32),
        truth=rng.integers(0, 1000, n).astype(np.int32),
        query_index=np.zeros(n, np.int16),
        unit_index=np.arange(n, dtype=np.int32),
        cell_index=np.zeros(n, np.int32),
    )


def build(url: str, n_blocks: int, reps: int, n: int) -> tuple[float, float, float]:
    """(seconds of the block writes, of computing their digests, of writing the digest chunks)."""
    store.create_residual_template(
        url,
        states=[f"ST{i:02d}" for i in range(n_blocks)],
        geolevels=["Block"],
        replicates=reps,
        n_items=n,
        queries=["q"],
        sigma2=np.ones((1, 1)),
        attrs={"run_id": "bench"},
    )
    rng = np.random.default_rng(0)
    blocks = [block(rng, reps, n) for _ in range(n_blocks)]
    t0 = time.perf_counter()
    for s, b in enumerate(blocks):
        store.write_residual_block(url, s, 0, b)
    write = time.perf_counter() - t0
    t0 = time.perf_counter()
    digests = [
        checksums.block_digests(
            {
                "residual": b.residual,
                "truth": b.truth,
                "query_index": b.query_index,
                "unit_index": b.unit_index,
                "cell_index": b.cell_index,
                "n_items": np.array([[n]], np.int64),
            }
        )
        for b in blocks
    ]
    hashing = time.perf_counter() - t0
    t0 = time.perf_counter()
    for s, d in enumerate(digests):
        residual_blocks.residual_array(url, "block_sha256", mode="r+")[s, 0] = d
    marks = time.perf_counter() - t0
    return write, hashing, marks


def main() -> None:
    n_blocks, reps, n = (
        int(a) for a in (sys.argv[1:] + ["16", "25", "40000"][len(sys.argv) - 1 :])
    )
    mb = n_blocks * reps * n * 4 / 2**20
    print(machine_info())
    print(f"{n_blocks} blocks x {reps} replicates x {n} items: {mb:.0f} MiB of residuals")
    with tempfile.TemporaryDirectory() as tmp:
        url = f"{tmp}/s.zarr"
        write, hashing, marks = build(url, n_blocks, reps, n)
        store.finalize(url)
        t0 = time.perf_counter()
        v = checksums.check(url)
        ver = time.perf_counter() - t0
    print(f"block writes (data + sha256 record): {write:7.2f} s ({mb / write:6.1f} MiB/s)")
    print(f"  of which hashing the values:       {hashing:7.2f} s ({100 * hashing / write:4.1f} %)")
    print(f"  of which writing the digest chunks: {marks:6.2f} s ({100 * marks / write:4.1f} %)")
    print(f"verify ({v.blocks} blocks, {v.arrays} arrays): {ver:7.2f} s ({mb / ver:6.1f} MiB/s)")


if __name__ == "__main__":
    main()
