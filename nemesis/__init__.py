"""Nemeses: faults, each a start/stop pair (nemesis/base.py); the registry is nemesis/registry.py,
the schedule that runs and records them nemesis/schedule.py."""
