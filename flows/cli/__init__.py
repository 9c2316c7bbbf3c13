"""The ``dpaudit`` command line, one module per concern:

- ``app``: the Typer app, its commands in ``--help`` order, ``--version``, :func:`~flows.cli.app.main`
- ``run``: run, spec, verify, report, serve (an audit and its store)
- ``experiments``: sweep, mpl-coverage, fdp-coverage; ``direct``: direct
- ``accounting``: account, calibrate (``accounting_results``: what they compute;
  ``accounting_tables``: how they print it); ``tradeoff``: tradeoff
- ``execute``: running one flow into one store on a cluster with the Prefect API; ``runlog``: what
  a run prints, sent to a log file
- ``checks``: the spec and every output path, checked before any work
- ``options``: options and choices shared by several commands; ``errors``: exit codes, the one
  error line, the log file of a failure, ``--debug``
- ``docgen``: the generated references (docs/cli.md, docs/spec-reference.md)
"""
