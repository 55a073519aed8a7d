"""Benchmarks for langchain-gated-parent (not part of the installed package)."""
