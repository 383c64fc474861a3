"""Benchmark suite for spacy_elmo: `python -m bench` (see docs/performance.md)."""
