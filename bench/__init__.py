"""Benchmarks: training and decoding speed side by side, data pipeline scale (``make bench``)."""
