"""Trace-driven simulation: replay recorded request traces through cache configurations and
compare them with the bounds (compulsory misses, Belady MIN, optimal static)."""
