"""The audit: its flow (``flow.py``), the stages beside the simulation, the thin Prefect tasks over
``auditlib`` and ``storage``, the result groups, claims and artifacts, production TopDown's tasks,
and the scheduled audits of ``dpaudit serve`` (``scheduled.py``)."""
