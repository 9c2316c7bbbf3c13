"""`s3://` stores against a real S3-compatible server started here on 127.0.0.1 (moto, server mode).

Endpoint and credentials reach dpaudit only through the environment (``FSSPEC_S3_ENDPOINT_URL``,
``AWS_*``), never through the spec, and must not appear in the store or on the terminal.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zarr

from auditlib.exceptions import StoreError
from storage import store
from tests._ceilings import PROCESS_CEILING_S
from tests.integration._specs import tiny_spec, to_toml
from tests.integration.test_cli_run import SPEC, dpaudit
from tests.unit.test_store_integrity import assert_no_pickles

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SECRET = "dpaudit-test-secret-0c5e1f"  # fake; moto accepts any credentials
#: one state (the nation and 7 levels: 8 blocks): each object of a store is requests to the server
ONE_STATE = to_toml(tiny_spec(simulation={"max_cells_per_query": 4}))


@dataclass
class S3:
    endpoint: str
    bucket: str
    env: dict[str, str]

    @property
    def options(self) -> dict[str, str]:
        return {"endpoint_url": self.endpoint}


@contextmanager
def atomic_writes() -> Iterator[None]:
    """moto's server, as S3: a conditional PUT or DELETE checked and done at once.

    S3 does a conditional write (``If-None-Match: *``, ``If-Match``) atomically: of two at once,
    one fails. moto's threaded server checks the condition, then writes, without a lock between
    (``moto/s3/responses.py``, ``put_object``), so two contenders can both pass the check: once
    in 96 takeovers of ``test_store_safety_s3.py``. Here one request at a time does either."""
    from moto.s3.responses import S3Response

    one = threading.Lock()
    saved = {name: getattr(S3Response, name) for name in ("put_object", "delete_object")}

    def serialized(method: Any) -> Any:
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            with one:
                return method(self, *args, **kwargs)

        return call

    for name, method in saved.items():
        setattr(S3Response, name, serialized(method))
    try:
        yield
    finally:
        for name, method in saved.items():
            setattr(S3Response, name, method)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3]:
    pytest.importorskip("s3fs", reason="the s3 extra is not installed: pip install -e '.[s3]'")
    from moto.server import ThreadedMotoServer

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with atomic_writes():  # before the server's first request, until it has stopped
        server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
        server.start()
        endpoint = f"http://127.0.0.1:{port}"
        creds = {
            "AWS_ACCESS_KEY_ID": "dpaudit-test-key",
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true",
        }
        saved = {k: os.environ.get(k) for k in creds}
        os.environ.update(creds)
        import boto3
        import fsspec.config

        # s3fs's mkdir sends a LocationConstraint moto refuses for us-east-1: the bucket by boto3
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="audits")
        saved_conf = fsspec.config.conf.get("s3")
        fsspec.config.conf["s3"] = {"endpoint_url": endpoint}  # what FSSPEC_S3_ENDPOINT_URL sets
        env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
        env["FSSPEC_S3_ENDPOINT_URL"] = endpoint
        try:
            yield S3(endpoint, "audits", env)
        finally:
            server.stop()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
            if saved_conf is None:
                fsspec.config.conf.pop("s3", None)
            else:
                fsspec.config.conf["s3"] = saved_conf


def test_run_into_s3_verify_and_read_back(s3: S3, tmp_path: Path) -> None:
    import s3fs
    import xarray as xr

    spec = tmp_path / "tiny.toml"
    spec.write_text(ONE_STATE)
    url = f"s3://{s3.bucket}/runs/a.zarr"
    cmd = [*dpaudit(), "run", str(spec), "--store", url, "--no-report"]
    done = subprocess.run(
        cmd, cwd=tmp_path, env=s3.env, capture_output=True, text=True, timeout=PROCESS_CEILING_S
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"store:  {url}" in done.stdout
    assert SECRET not in done.stdout + done.stderr
    # a notebook opens it with one call (consolidated=True refuses an unfinished store)
    ds = xr.open_zarr(url, group="accounting", storage_options=s3.options, consolidated=True)
    # REFERENCE.md, accounting table: State exact eps at delta = 1e-10 is 9.600900
    assert round(float(ds.eps_exact_upper.sel(geolevel="State", delta=1e-10)), 4) == 9.6009
    assert store.is_complete(url)

    fs = s3fs.S3FileSystem(endpoint_url=s3.endpoint)
    keys = fs.find(f"{s3.bucket}/runs")
    assert keys and all(k.startswith(f"{s3.bucket}/runs/a.zarr/") for k in keys)  # lock removed
    assert not any(SECRET.encode() in fs.cat_file(k) for k in keys if k.endswith("zarr.json"))
    assert assert_no_pickles(url) > 20

    # the rest in-process (the environment's endpoint is in fsspec's config here too)
    from typer.testing import CliRunner

    from flows.cli.app import app

    runner = CliRunner()
    ok = runner.invoke(app, ["verify", url])
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith(f"ok: {url}: ")

    # a second run must not replace it without --overwrite (refused before anything starts)
    again = runner.invoke(app, ["run", str(spec), "--store", url, "--no-report"])
    assert again.exit_code == 2 and "already exists; pass --overwrite" in again.stderr

    # --overwrite with a run that fails midway (a 1 s flow timeout): the old store is untouched,
    # since the new one is built beside it and published only once complete
    before = {k: fs.info(k)["ETag"] for k in fs.find(f"{s3.bucket}/runs/a.zarr")}
    # ... and a staging prefix another spec left behind is cleared when this run starts
    store.claim_staging(
        f"s3://{s3.bucket}/runs/.a.zarr.partial-0123456789abcdef", "0123456789abcdef"
    )
    doomed = tmp_path / "doomed.toml"
    doomed.write_text(ONE_STATE + "\n[cluster]\ntimeout_s = 1\n")
    failed = runner.invoke(app, ["run", str(doomed), "--store", url, "--overwrite", "--no-report"])
    assert failed.exit_code == 1 and "the run failed" in failed.stderr, failed.output
    fs.invalidate_cache()
    assert {k: fs.info(k)["ETag"] for k in fs.find(f"{s3.bucket}/runs/a.zarr")} == before
    # the stale prefix is gone (a task of the timed-out run may still write into its own staging
    # prefix after the flow gave up; the next run of that spec removes or resumes it)
    assert not fs.find(f"{s3.bucket}/runs/.a.zarr.partial-0123456789abcdef")
    assert store.is_complete(url)  # its objects those that verified above

    # a lost chunk object is found and named
    grp = zarr.open_group(url, mode="r", zarr_format=3, path="residuals")
    first = int(grp["item_offset"][1, 1]) // int(grp["truth"].chunks[0])  # type: ignore[arg-type, union-attr]
    chunk = f"{s3.bucket}/runs/a.zarr/residuals/residual/c/0/{first}"  # ST01/State's first chunk
    assert fs.exists(chunk)
    fs.rm_file(chunk)
    bad = runner.invoke(app, ["verify", url])
    assert bad.exit_code == 1
    assert "residuals/residual block (state=ST01, geolevel=State): checksum mismatch" in bad.stderr
    rep = runner.invoke(app, ["report", url, "-o", str(tmp_path / "r.html")])
    assert rep.exit_code == 1 and "failed its integrity check" in rep.stderr
    assert not (tmp_path / "r.html").exists()


def test_s3_lock_refuses_a_second_writer(s3: S3) -> None:
    import json

    import s3fs

    url = f"s3://{s3.bucket}/locks/b.zarr"
    fs = s3fs.S3FileSystem(endpoint_url=s3.endpoint)
    lock = f"{s3.bucket}/locks/b.zarr.lock"
    with store.exclusive(url):
        assert json.loads(fs.cat_file(lock))["pid"] == os.getpid()
        with pytest.raises(StoreError, match=r"another dpaudit run \(host .*\) is writing"):
            with store.exclusive(url):
                pass
        assert fs.exists(lock)  # the holder's lock is untouched
    assert not fs.exists(lock)
    # a lock left by a killed run on this host is taken over; one from another host is not
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                          capture_output=True, text=True)  # fmt: skip
    host = socket.gethostname()
    fs.pipe_file(lock, json.dumps({"host": host, "pid": int(dead.stdout)}).encode())
    with store.exclusive(url):
        assert json.loads(fs.cat_file(lock))["pid"] == os.getpid()
    fs.pipe_file(lock, json.dumps({"host": "elsewhere", "pid": 1}).encode())
    with pytest.raises(
        StoreError, match=r"delete the lock object 's3://audits/locks/b\.zarr\.lock'"
    ):
        with store.exclusive(url):
            pass
    fs.rm_file(lock)


def test_unreachable_s3_endpoint_is_a_clear_error(
    s3: S3, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fsspec.config
    from typer.testing import CliRunner

    from flows.cli.app import app

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setitem(fsspec.config.conf, "s3", {"endpoint_url": f"http://127.0.0.1:{port}"})
    url = f"s3://{s3.bucket}/nowhere/a.zarr"
    with pytest.raises(StoreError, match=rf"cannot reach '{url}': .*check the endpoint"):
        store.check_target(url, overwrite=False)
    spec = tmp_path / "tiny.toml"
    spec.write_text(SPEC)
    res = CliRunner().invoke(app, ["run", str(spec), "--store", url, "--no-report"])
    assert res.exit_code == 2 and "cannot reach" in res.stderr
    assert SECRET not in res.output
