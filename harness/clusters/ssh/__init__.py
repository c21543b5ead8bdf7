"""The user's own machines over SSH (`run --hosts`). Nothing here uses Docker."""
