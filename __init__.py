"""Leaseline: a Jepsen-style consistency test harness that measures stale reads against a
leader-lease window.

The checkout's root is this package (pyproject.toml maps it): cli.py, harness/, workloads/,
nemesis/ and checkers/ install as leaseline.cli, leaseline.harness, … This module stays
empty of imports: the Spark job's executors are sent it with checkers/ alone."""
