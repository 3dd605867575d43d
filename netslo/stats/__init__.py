"""Samples and their statistics: the compact sample containers, their file and stream formats,
exact order statistics, delay series and ``analysis.analyze`` (estimates with confidence intervals)."""
