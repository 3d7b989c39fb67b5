"""Backtrail's benchmark harness: corpus builder, known-item query sets and baseline engines.

Run the modules from the repository root, e.g. ``python -m bench.corpus``; generated data
goes to ``bench/data/`` (git-ignored). See ``bench/README.md``.
"""
