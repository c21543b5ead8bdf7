#!/usr/bin/env bash
# Relocks the dependencies: requirements.lock (every package of the project and its dev
# extra, pinned with the hashes of all their files, for every Python >= 3.11 and platform)
# from pyproject.toml, then the images' requirement files from the lock. Run it after
# changing a dependency in pyproject.toml or to move to newer versions; commit the result.
# scripts/setup.sh installs .venv from the lock, the images install their files.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
UV=".venv/bin/uv"
[ -x "$UV" ] || { echo "lock.sh: run scripts/setup.sh first (uv comes with the dev extra)" >&2; exit 1; }
# --upgrade: newest versions allowed; without it, the versions already locked are kept.
"$UV" pip compile pyproject.toml --extra dev --universal --python-version 3.11 \
    --generate-hashes --no-header --quiet "$@" -o requirements.lock
.venv/bin/python scripts/image_requirements.py
