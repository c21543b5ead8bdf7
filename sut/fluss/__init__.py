"""Apache Fluss: the image of a Fluss cluster and the lease client (no Fluss code here)."""
