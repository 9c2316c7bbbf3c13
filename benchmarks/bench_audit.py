"""End-to-end timing of the default audit (`dpaudit run` on the shipped spec), in a temporary directory.

    .venv/bin/python benchmarks/bench_audit.py [SPEC]

Prints machine info, wall time of the whole command (embedded Prefect API + local Dask cluster + store
+ report) and of the flow itself (from the store's attributes), and the store's size.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    spec = [str(Path(sys.argv[1]).resolve())] if sys.argv[1:] else []
    exe = Path(sys.executable).with_name("dpaudit")
    print(f"{platform.platform()} | {os.cpu_count()} CPUs | Python {platform.python_version()}")
    print(f"load average before: {os.getloadavg()}")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        done = subprocess.run([str(exe), "run", *spec], cwd=tmp, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            print(done.stderr[-2000:])
            raise SystemExit(done.returncode)
        print(done.stdout)
        import zarr

        attrs = zarr.open_group(str(Path(tmp, "results", "audit.zarr")), mode="r").attrs
        size = sum(
            f.stat().st_size for f in Path(tmp, "results", "audit.zarr").rglob("*") if f.is_file()
        )
        print(
            f"command wall time {wall:.1f} s; flow {attrs['wall_time_s']:.1f} s; store {size / 1e6:.1f} MB"
        )


if __name__ == "__main__":
    main()
