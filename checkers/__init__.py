"""The PySpark job and the per-key checking algorithms, explanations and reports."""
