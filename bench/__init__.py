"""Prism benchmarks: load and scale measurements with their results tables (see bench/README.md)."""
