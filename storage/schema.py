"""Names of the result store's groups, dimensions and variables (one place to change them).

A store is one Zarr v3 hierarchy per audit run, with consolidated metadata:

- root attrs: ``dpaudit_version``, ``run_id``, ``spec_toml``, ``allocation_id``, ``allocation_source``,
  ``neighbours``, ``created_utc``, ``seed``, ``n_workers``, ``dask_scheduler``, ``software`` (JSON),
  ``wall_time_s``.
- ``residuals``: ``residual(state, geolevel, replicate, item)`` float32 (DP − truth, NaN padding);
  ``truth``, ``query_index`` (−1 padding), ``unit_index``, ``cell_index`` (state, geolevel, item);
  ``n_items(state, geolevel)``; ``sigma2(geolevel, query)``. One chunk per (state, geolevel).
  ``block_sha256(state, geolevel, block_var, byte)``: the sha256 of each block variable, written
  after the block (zero: the block was never written; see ``storage/checksums.py``).
- ``epl``: per-state ``epl(state, geolevel, query)``; pooled ``epl_pooled``, ``epl_status``,
  ``n_residuals``, ``sigma2``, ``bandwidth`` (geolevel, query); curves ``epl_curve_x``,
  ``epl_curve`` (geolevel, query, point); the bias-aware estimate ``epl_bias_aware`` with its
  bootstrap interval ``epl_ci_low``/``epl_ci_high``, matched floor ``epl_null_upper`` and the slope
  estimate ``inv_sigma2_hat`` (geolevel, query).
- ``accounting``: ``rho``, ``sigma2_min``, ``sigma2_max``, ``n_queries`` (geolevel);
  ``eps_exact_lower``, ``eps_exact_upper``, ``eps_bureau``, ``eps_cks`` (geolevel, delta);
  ``delta_exact_upper``, ``delta_bureau`` (geolevel, eps_grid); f-DP curves ``tradeoff_exact_lower``,
  ``tradeoff_bureau`` (geolevel, alpha); ``composed_*`` (delta, eps_grid, alpha) and ``composed_rho``.
"""

from __future__ import annotations

RESIDUALS = "residuals"
EPL = "epl"
ACCOUNTING = "accounting"
GROUPS = (RESIDUALS, EPL, ACCOUNTING)

STATE = "state"
GEOLEVEL = "geolevel"
REPLICATE = "replicate"
ITEM = "item"
QUERY = "query"
POINT = "point"
DELTA = "delta"
EPS_GRID = "eps_grid"
ALPHA = "alpha"

RESIDUAL_BLOCK_VARS = ("residual", "truth", "query_index", "unit_index", "cell_index", "n_items")

#: marks a store written completely by dpaudit (set last, after every group)
COMPLETE_ATTR = "dpaudit_complete"
#: residuals group attribute: its template (metadata of every array) is written
TEMPLATE_COMPLETE_ATTR = "dpaudit_template_complete"
#: marks a group written completely (set after its data and checksums)
GROUP_COMPLETE_ATTR = "dpaudit_group_complete"
#: group attribute {array name: sha256 hex} of every array not checked per block
SHA256_ATTR = "dpaudit_sha256"
#: per-block checksums of the residual variables (and the resume marker)
BLOCK_SHA256 = "block_sha256"
BLOCK_VAR = "block_var"
BYTE = "byte"
