"""Result stores: Zarr v3 hierarchies of residuals, EPL surfaces and accounting curves."""
