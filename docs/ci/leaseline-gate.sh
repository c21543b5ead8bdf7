#!/usr/bin/env bash
# The commands of Leaseline's CI gate: build the local images and the system's image from
# its file, run a campaign, leave its junit.xml where the CI's report step finds it. The
# campaign's exit code is the script's: 0 every expectation held, 1 one did not, 2 a run
# could not be decided, 254/255 bad input or a harness failure. github-actions.yml runs it after installing
# Leaseline; tests/test_ci_example.py runs it too, from a wheel installed into a fresh venv.
#
#   leaseline-gate.sh SYSTEM.toml CAMPAIGN.json [RESULTS_DIR]   (default: leaseline-results)
set -euo pipefail
usage="usage: leaseline-gate.sh SYSTEM.toml CAMPAIGN.json [RESULTS_DIR]"
system="${1:?$usage}"
campaign="${2:?$usage}"
results="${3:-leaseline-results}"
leaseline="$(command -v leaseline)" || { echo "leaseline-gate: leaseline is not installed" >&2; exit 255; }

# Only the images the campaign's runs boot: the base image, the fault helpers' and the
# system's (not every image Leaseline ships). The base image is made once with debootstrap,
# which needs root (a CI cache may hold it: then root is not needed); the rest needs Docker.
if ! docker image inspect leaseline/base:bookworm >/dev/null 2>&1; then
    sudo=()
    if [ "$(id -u)" != 0 ]; then sudo=(sudo --preserve-env=PATH,DOCKER_HOST); fi
    "${sudo[@]}" "$leaseline" images build --campaign "$campaign"
fi
"$leaseline" images build --campaign "$campaign" --sut "$system"

status=0
"$leaseline" campaign "$campaign" --results-dir "$results" || status=$?
# One place for the CI's report step: the campaign's junit.xml (a suite per case with its expectation, a test per run). The
# run folders beside it hold each run's report.html, history and node logs.
mkdir -p "$results/ci"
cp "$results"/campaigns/*/latest/junit.xml "$results/ci/junit.xml" 2>/dev/null || true
exit "$status"
