"""Readers of history formats: each produces KeyHistory values (checkers/ops.py)."""
