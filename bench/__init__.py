"""Benchmark commands (`python -m bench.<name>`); results are recorded in docs/benchmarks.md."""
