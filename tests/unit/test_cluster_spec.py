"""The spec's cluster section: a cluster class by import path, its kwargs and adaptive bounds."""

from __future__ import annotations

import tomllib

import pytest

from auditlib.exceptions import SpecError
from flows.spec import load_spec, parse_spec


def test_class_kwargs_and_adapt_round_trip_through_toml() -> None:
    s = parse_spec(
        {
            "cluster": {
                "class": "distributed.LocalCluster",
                "kwargs": {"n_workers": 1, "processes": True},
                "adapt": {"minimum": 1, "maximum": 3},
            }
        }
    )
    assert s.cluster.cluster_class == "distributed.LocalCluster"
    text = s.to_toml()
    assert 'class = "distributed.LocalCluster"' in text
    assert parse_spec(tomllib.loads(text)) == s


def test_default_spec_text_has_no_cluster_class_keys() -> None:
    """Specs without a class keep their TOML (and so their run id) unchanged."""
    text = load_spec().to_toml().split("[cluster]")[1]
    assert "class" not in text and "kwargs" not in text and "adapt" not in text


@pytest.mark.parametrize(
    ("cluster", "needle"),
    [
        ({"class": "no_such_module.Cluster"}, "module 'no_such_module' cannot be imported"),
        ({"class": "LocalCluster"}, "not an import path"),
        ({"class": "distributed.Client"}, "'Client' in 'distributed' is not a Dask cluster class"),
        ({"kwargs": {"n_workers": 1}}, "cluster.kwargs is set but cluster.class is not"),
        (
            {"scheduler": "tcp://127.0.0.1:8786", "class": "distributed.LocalCluster"},
            "cannot be combined with cluster.class",
        ),
        ({"adapt": {"minimum": 3, "maximum": 2}}, "minimum 3 exceeds maximum 2"),
        ({"adapt": {"minimum": 0, "maximum": 2, "max": 4}}, "cluster.adapt.max: unknown key"),
        ({"lost_workers_grace_s": 0}, "cluster.lost_workers_grace_s = 0: Input should be greater"),
    ],
)
def test_bad_cluster_sections_are_named(cluster: dict[str, object], needle: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec({"cluster": cluster})
    assert needle in str(err.value)


def test_unknown_kwargs_of_a_class_without_var_keywords() -> None:
    from distributed.deploy.cluster import Cluster

    from flows.spec.cluster import check_cluster_kwargs

    class Fixed(Cluster):
        def __init__(self, cores: int = 1) -> None:  # pragma: no cover - never built
            pass

    check_cluster_kwargs(Fixed, {"cores": 2})
    with pytest.raises(
        ValueError, match="unknown argument\\(s\\) memory for Fixed; allowed: cores"
    ):
        check_cluster_kwargs(Fixed, {"cores": 2, "memory": "1GB"})


def test_local_cluster_listens_on_loopback_only_and_on_free_ports() -> None:
    """The local cluster the flows start: scheduler, nanny, worker and HTTP server all listen on
    127.0.0.1, none on distributed's fixed 8787 (it clashes with any other cluster on the machine)."""
    import psutil
    from distributed import LocalCluster

    from flows.runtime.cluster import task_runner

    def listening() -> set[tuple[str, int]]:
        procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
        return {
            (c.laddr.ip, c.laddr.port)
            for p in procs
            for c in p.net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        }

    before = listening()  # e.g. a cluster another test of this session left running
    with LocalCluster(**task_runner("", 1, 1, "1GiB").cluster_kwargs):
        new = listening() - before
    assert len(new) >= 3  # scheduler, its HTTP server, the nanny and worker
    assert {ip for ip, _ in new} == {"127.0.0.1"}
    assert 8787 not in {port for _, port in new}
