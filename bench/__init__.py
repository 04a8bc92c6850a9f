"""Benchmarks (run as modules: python -m bench.<name>); results go to bench/results/."""
