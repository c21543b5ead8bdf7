#!/usr/bin/env bash
# The lower bounds in pyproject.toml are what the code needs: installs the LOWEST versions
# they allow (uv's lowest-direct resolution: each direct dependency at its bound, theirs as
# resolved) into a venv of its own and runs the quick suite there (no Docker, Spark on
# local[N]). Not part of ./run-tests (a fresh set of downloads); run it after raising or
# lowering a bound. Extra arguments go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UV=".venv/bin/uv"
[ -x "$UV" ] || { echo "lowest-deps.sh: run scripts/setup.sh first (uv comes with the dev extra)" >&2; exit 1; }
VENV="$ROOT/.leaseline/lowest-venv"
REQS="$ROOT/.leaseline/lowest.txt"
"$UV" pip compile pyproject.toml --extra dev --resolution lowest-direct --python-version 3.11 \
    --no-header --quiet -o "$REQS"
echo "lowest allowed versions:" >&2
grep -E '^[A-Za-z]' "$REQS" | sed 's/ .*//' | tr '\n' ' ' >&2; echo >&2
rm -rf "$VENV"
python3 -m venv "$VENV"
"$UV" pip install --quiet --python "$VENV/bin/python" -r "$REQS"
"$UV" pip install --quiet --python "$VENV/bin/python" --no-deps -e .  # with its compiled search
# test_lock.py checks this environment against the lock, which it is not made from.
exec "$VENV/bin/pytest" -q -p no:cacheprovider -m "not docker and not slow and not browser" \
    --deselect tests/test_lock.py::test_driver_and_executors_run_the_same_pyspark "$@"
