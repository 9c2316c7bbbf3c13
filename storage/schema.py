"""Names of the result store's groups, dimensions and variables (one place to change them).

A store is one Zarr v3 hierarchy per audit run, with consolidated metadata:

- root attrs: ``dpaudit_store`` (true; written with the root group itself, in the same write: the
  mark of a hierarchy created by dpaudit — only such a store, or an empty directory, is ever
  replaced with ``--overwrite`` or deleted as a staging copy), ``dpaudit_metadata_sha256``
  (written when the store is finalized: {path of every node's own ``zarr.json`` relative to the
  root: sha256 hex of its bytes}, every node but the root, whose metadata is the consolidated copy
  and holds this record), ``dpaudit_root_sha256`` (written last, after consolidation: the digests
  of the root document itself and of every consolidated copy in it), ``dpaudit_version``, ``run_id``, ``spec_toml``, ``allocation_id``, ``allocation_source``,
  ``neighbours``, ``created_utc``, ``seed``, ``n_workers``, ``dask_scheduler``, ``software`` (JSON),
  ``wall_time_s``.
- ``residuals`` (attr ``dpaudit_layout`` = 4; ``storage/residuals.py``, which also reads layouts 1
  to 3; layout 4 writes a block as the chunks of its items, not of its capacity; layout 3 chunks ``residual``'s replicate axis by the attr ``replicate_chunk``, the
  replicate ranges of the tasks that write it, and records ``replicate_sha256(state, geolevel,
  replicate, byte)``, each replicate row's digest, the completion marker of its range):
  ``residual(replicate, item)`` float32 (DP − truth); ``truth``, ``query_index``, ``unit_index``,
  ``cell_index`` (item): every (state, geolevel) block at its own length on one item axis, block
  (s, g) starting at ``item_offset(state, geolevel)`` (a chunk boundary) and holding
  ``n_items(state, geolevel)`` ≤ ``item_capacity(state, geolevel)`` (its planned items) items, then
  NaN / −1 padding to the end of their last chunk (< 65,536 items; the rest of its planned place is
  never written); ``sigma2(geolevel, query)``. Each
  block is written as whole chunks by one task. ``block_sha256(state, geolevel, block_var, byte)``:
  the sha256 of each block variable over the block's chunks, written after the block (zero: the
  block was never written; see ``storage/checksums.py``). Layout 1 (stores written before; no
  ``dpaudit_layout``): the block variables had (state, geolevel) dimensions, every block padded to
  the largest, one chunk per block.
- ``epl``: per-state ``epl(state, geolevel, query)``; pooled ``epl_pooled``, ``epl_status``,
  ``n_residuals``, ``sigma2``, ``bandwidth`` (geolevel, query); curves ``epl_curve_x``,
  ``epl_curve`` (geolevel, query, point); the bias-aware estimate ``epl_bias_aware`` with its
  bootstrap interval ``epl_ci_low``/``epl_ci_high``, matched floor ``epl_null_upper`` and the slope
  estimate ``inv_sigma2_hat`` (geolevel, query); ``floor_reference`` (geolevel, query): what the floor
  was drawn from (``matched``: a discrete Gaussian of the residuals' variance; ``declared …``: a
  published release's declared noise); ``kde_error`` (geolevel, query), the bound on the
  relative error of every KDE behind that (geolevel, query)'s EPLs (0: exact lattice residuals;
  non-integer residuals are binned on a fine lattice). Knobs in the attrs (``bias_aware_settings``,
  JSON; ``bias_aware``, ``surface``, ``kde_error`` say what each variable is). EPL(x) surfaces of
  the bias-aware estimate with a pointwise bootstrap band (90 %, basic by default; spec
  ``[epl].confidence``, ``ci_kind``): ``surface_x``, ``surface``, ``surface_low``,
  ``surface_high`` (state, geolevel, query, surface_point) per state and ``surface_pooled_x``,
  ``surface_pooled``, ``surface_pooled_low``, ``surface_pooled_high`` (geolevel, query,
  surface_point) over all states; float32, NaN padding, at most 101 points per curve (thinned
  evenly, ends and argmax kept). Composed EPL of the counts containing one person (scalars):
  ``epl_composed`` (sum of per-level bias-aware EPLs; attr ``composed_over``) with
  ``epl_composed_ci_low``/``_ci_high`` (sums of the per-level intervals),
  ``epl_composed_projection`` (EPL of the Gaussian-optimal combination of a path: a lower-bound
  check), ``composed_dependence_factor``; ``level_correlation(geolevel, geolevel_b)`` the
  cross-level residual correlations along paths leaf → root (Flaxman 2019 trees; NaN otherwise).
  TopDown releases also store the bias of unit totals conditional on the truth:
  ``total_bias(geolevel, truth_class)``, the mean released − true total of the level's units whose
  true total is 0 (``empty``) or > 0 (``populated``) — and of the populated ones by true total
  (``1–9``, ``10–99``, ``100–999``, ``≥ 1000``; stores written before hold the first two) — over
  every unit, state and replicate, and
  ``total_bias_units(geolevel, truth_class)``, how many (unit, replicate) pairs it averages.
- ``accounting``: ``rho``, ``sigma2_min``, ``sigma2_max``, ``n_queries`` (geolevel);
  ``eps_exact_lower``, ``eps_exact_upper``, ``eps_bureau``, ``eps_cks`` (geolevel, delta);
  ``delta_exact_upper``, ``delta_bureau`` (geolevel, eps_grid); f-DP curves ``tradeoff_exact_lower``,
  ``tradeoff_bureau`` (geolevel, alpha); ``composed_*`` (delta, eps_grid, alpha) and ``composed_rho``.
  Su, Su & Wang's reduced noise (Table 1) at δ* = attr ``calibration_delta`` (the spec's smallest δ), per
  geolevel and ``composed_*``: ``calibration_target_eps`` (the Bureau's ε(δ*)), the certified factor
  ``calibration_factor_lower``/``_upper`` of every σ², ``variance_cut_lower``/``_upper`` (1 − factor)
  and ``reduced_sigma2_min``/``_max`` (σ² range times the conservative ``calibration_factor_upper``).
- ``accuracy`` (with ``accounting``): exact errors of one query's count (Su, Su & Wang §3.4) under the
  Bureau's and the reduced noise: ``sigma2``, ``mse``, ``mae`` (geolevel, query, noise) without
  post-processing (the large-count limit); ``mse_clipped``, ``mae_clipped`` (geolevel, query, noise,
  count) of ``max(0, count + noise)``; ``noise`` is ``bureau`` / ``reduced``; NaN: not measured.
- ``mpl`` (only with ``[mpl] enabled``): maximum privacy loss (Askin, Kutta & Dette) of one released cell count
  per geolevel — the geolevel's least noisy query (largest ρ_q, σ² under the run's neighbours) — on
  D vs D′ (``mpl_pair``: one person added / removed / moved in). Per geolevel: ``query``,
  ``sigma2``, ``count`` (the cell's true count in D), ``lb`` (lower confidence bound on ε*_C, level
  1 − ``alpha``; the raw estimate, which may be < 0: a bound ≤ 0 is vacuous, reports show it as
  0), ``eps_hat`` (step-1 maximum over pairs and C), ``t_hat`` (the chosen output),
  ``best_pair``, ``loss_star`` (ℓ̂*(t̂) on the fresh draws), ``f_x``, ``f_x_prime`` (f̂ at t̂),
  ``sigma_hat``, ``c_n``, ``bandwidth`` (confidence step; NaN for discrete outputs),
  ``floor_driven``, ``edge``, ``sparse_support`` (guard-rail flags), ``epsilon_c`` (the exact
  ε*_C over the pairs and C; NaN if unknown); per (geolevel, mpl_pair): ``eps_hat_pair``,
  ``t_hat_pair``, ``bandwidth_x``, ``bandwidth_x_prime`` (step 1; NaN for discrete); the loss curves
  ``loss_curve`` (geolevel, mpl_pair, point) on the grid ``loss_t`` (geolevel, point), NaN padding;
  the hockey-stick divergence at ``mpl_eps``: ``delta_hat`` (plug-in), ``delta_lb`` (lower
  confidence bound) and ``delta_exact`` (geolevel, mpl_eps). Attrs: ``alpha``, ``n``,
  ``n_confidence``, ``tau``, ``radius_sd``, ``neighbours``, ``method``.
  With ``[mpl] fdp`` (default) also the empirical f-DP points of the best pair's count
  (:mod:`auditlib.mpl.tradeoff_lower`, own draws, confidence 1 − ``alpha``): ``fdp_alpha_upper``,
  ``fdp_beta_upper`` (certified: w.p. ≥ 1 − alpha every point lies on or above the count's
  trade-off curve), ``fdp_alpha_hat``, ``fdp_beta_hat`` (plug-in) along (geolevel, fdp_point),
  NaN padding; ``fdp_mu_lower`` (lower confidence bound on μ of μ-GDP); beside them, copied from
  the ``accounting`` group when it holds the level, the certified curves ``fdp_exact_lower`` and
  ``fdp_bureau`` (geolevel, alpha) and ``fdp_gap`` (geolevel), the largest β_u − certified curve at
  α_u (:mod:`auditlib.mpl.fdp_gap`; errs high, near 0: the accounting is tight; NaN: no curve).
- ``claims`` (every audit with an ``accounting`` group): one verdict per accounted geolevel on the
  declared claim (the allocation's exact ε at the headline δ), from
  :func:`auditlib.claims.decide`. ``claim_verdict`` (geolevel): ``consistent``, ``refuted`` or
  ``undecided``; ``claim_evidence`` (geolevel): a short JSON object — ``test`` (which test
  decided: ``by_construction`` for a release whose noise dpaudit drew, ``scale`` / ``fit`` /
  ``none`` for a published one), ``statistic``, ``p_value``, ``threshold`` (the per-test level
  α/m), ``eps_interval`` ([lower, upper] confidence interval on ε(δ) from the residuals' noise
  scale, carried through the certified accountant), ``declared_eps``, ``measured_at`` (the table
  level whose residuals were tested), ``n`` (residuals), ``assumptions``; ``claim_sentence``
  (geolevel): the one sentence every face prints. Attrs: ``alpha`` (familywise error rate),
  ``n_tests`` (m), ``basis`` (``simulated`` or ``observed``), ``delta`` (the headline δ),
  ``rule`` (the decision rule in words).
"""

from __future__ import annotations

RESIDUALS = "residuals"
EPL = "epl"
ACCOUNTING = "accounting"
ACCURACY = "accuracy"
MPL = "mpl"
CLAIMS = "claims"
GROUPS = (RESIDUALS, EPL, ACCOUNTING)

STATE = "state"
GEOLEVEL = "geolevel"
REPLICATE = "replicate"
ITEM = "item"
QUERY = "query"
POINT = "point"
SURFACE_POINT = "surface_point"
GEOLEVEL_B = "geolevel_b"
DELTA = "delta"
EPS_GRID = "eps_grid"
ALPHA = "alpha"
NOISE = "noise"
COUNT = "count"
MPL_PAIR = "mpl_pair"
MPL_EPS = "mpl_eps"
FDP_POINT = "fdp_point"
TRUTH_CLASS = "truth_class"

RESIDUAL_BLOCK_VARS = ("residual", "truth", "query_index", "unit_index", "cell_index", "n_items")

#: marks a hierarchy created by dpaudit (root attribute, written together with the root group)
STORE_ATTR = "dpaudit_store"
#: marks a store written completely by dpaudit (set last, after every group)
COMPLETE_ATTR = "dpaudit_complete"
#: root attribute {node path/zarr.json: sha256 hex of its bytes}, every node but the root (finalize)
METADATA_SHA256_ATTR = "dpaudit_metadata_sha256"
#: root attribute {"root": sha256 of the root zarr.json but its consolidated copies and this record,
#: "consolidated": {node path: sha256 of its consolidated copy}}, canonical JSON (finalize, last)
ROOT_SHA256_ATTR = "dpaudit_root_sha256"
#: root attribute written before dpaudit_store existed: still recognised as dpaudit's
LEGACY_VERSION_ATTR = "dpaudit_version"
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
