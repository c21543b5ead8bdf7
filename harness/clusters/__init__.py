"""Where a system runs: the Cluster protocol (base.py) and its two
implementations, Docker (docker/) and the user's own machines over SSH
(ssh/), with the network rules both apply."""
