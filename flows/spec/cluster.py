"""The spec's ``[cluster]`` section: where tasks run (an external scheduler, a Dask cluster class by
import path with its keyword arguments, or a local cluster) and how work is packed into tasks."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, StrictInt, field_validator, model_validator

from flows.spec.sections import Strict


class AdaptSection(Strict):
    minimum: Annotated[StrictInt, Field(ge=0, le=100_000)] = 0
    maximum: Annotated[StrictInt, Field(gt=0, le=100_000)] = 1

    @model_validator(mode="after")
    def _order(self) -> AdaptSection:
        if self.minimum > self.maximum:
            raise ValueError(
                f"cluster.adapt minimum {self.minimum} exceeds maximum {self.maximum}; "
                "use minimum <= maximum"
            )
        return self


class ClusterSection(Strict):
    #: where tasks run, one of: ``scheduler`` (an external ``dask scheduler``), ``class`` (a Dask
    #: cluster class by import path, e.g. ``dask_jobqueue.SLURMCluster``, built with ``kwargs``), or
    #: neither (a local cluster of ``n_workers`` processes). ``adapt`` scales a local or class cluster.
    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, validate_by_name=True,
        validate_by_alias=True, serialize_by_alias=True,
    )  # fmt: skip

    scheduler: str = ""
    cluster_class: str | None = Field(
        default=None, validation_alias="class", serialization_alias="class"
    )
    kwargs: dict[str, Any] | None = None
    adapt: AdaptSection | None = None
    n_workers: Annotated[StrictInt, Field(gt=0, le=1024)] = 2
    threads_per_worker: Annotated[StrictInt, Field(gt=0, le=256)] = 1
    memory_limit: str = "4GiB"
    timeout_s: Annotated[StrictInt, Field(gt=0)] = 3600
    #: seconds the run waits, once every worker is gone, for one to come back before it fails
    lost_workers_grace_s: Annotated[float, Field(gt=0, le=86_400)] = 60.0
    #: seconds to reach the scheduler and get its handshake before the run is refused
    connect_timeout: Annotated[float, Field(gt=0, le=600)] = 10.0
    tasks_per_worker: Annotated[StrictInt, Field(ge=0, le=1024)] = 2
    #: TopDown: a state's replicates run in tasks of at most this many (0: all in one task)
    replicates_per_task: Annotated[StrictInt, Field(ge=0, le=1_000_000)] = 25
    #: production TopDown: the processes a state's task solves its fits' parts in (1: its own)
    fit_processes: Annotated[StrictInt, Field(ge=1, le=256)] = 1

    @field_validator("memory_limit")
    @classmethod
    def _memory(cls, v: str) -> str:
        from dask.utils import parse_bytes

        try:
            size = parse_bytes(v)
        except ValueError:
            raise ValueError("must be a size such as '4GiB' or '2000MB'") from None
        if size <= 0:
            raise ValueError("must be a positive size such as '4GiB' or '2000MB'")
        return v

    @field_validator("cluster_class")
    @classmethod
    def _class(cls, v: str | None) -> str | None:
        if v:
            import_cluster_class(v)  # raises ValueError naming the path and the fix
        return v or None

    @model_validator(mode="after")
    def _one_target(self) -> ClusterSection:
        if self.scheduler and (self.cluster_class or self.adapt):
            raise ValueError(
                f"cluster.scheduler = {self.scheduler!r} cannot be combined with cluster.class or "
                'cluster.adapt; set scheduler = "" to build the cluster here'
            )
        if self.kwargs and not self.cluster_class:
            raise ValueError(
                "cluster.kwargs is set but cluster.class is not; name the class "
                '(e.g. class = "dask_jobqueue.SLURMCluster") or drop kwargs'
            )
        if self.cluster_class and self.kwargs:
            check_cluster_kwargs(import_cluster_class(self.cluster_class), self.kwargs)
        return self


def import_cluster_class(path: str) -> type:
    """The Dask cluster class named by ``module.Class``; ``ValueError`` naming the fix otherwise."""
    import importlib
    import inspect

    module, _, name = path.rpartition(".")
    if not module or not name:
        raise ValueError("not an import path module.Class; use e.g. 'dask_jobqueue.SLURMCluster'")
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        raise ValueError(
            f"module {module!r} cannot be imported ({exc}); install the "
            "package that provides it (e.g. `pip install dask-jobqueue`)"
        ) from None
    cls = getattr(mod, name, None)
    from distributed.deploy.cluster import Cluster

    if not (inspect.isclass(cls) and issubclass(cls, Cluster)):
        raise ValueError(
            f"{name!r} in {module!r} is not a Dask cluster class (a subclass of "
            "distributed.deploy.Cluster); check the name"
        )
    return cls


def check_cluster_kwargs(cls: type, kwargs: dict[str, Any]) -> None:
    """Refuse keyword arguments the class cannot take (classes taking ``**kwargs`` pass them on:
    those are checked when the cluster starts)."""
    import inspect

    sig = inspect.signature(cls)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    unknown = sorted(set(kwargs) - set(sig.parameters))
    if unknown:
        allowed = ", ".join(p for p in sig.parameters if p != "self")
        raise ValueError(
            f"cluster.kwargs has unknown argument(s) {', '.join(unknown)} for {cls.__name__}; "
            f"allowed: {allowed}"
        )
