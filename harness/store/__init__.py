"""The store: a run's folder and its files (history, test.json, results.json)."""
