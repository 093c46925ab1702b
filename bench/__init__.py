"""Benchmark runner and fio helpers shared with the tests."""
