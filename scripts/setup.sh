#!/usr/bin/env bash
# Makes a fresh Debian machine ready for Leaseline, and does nothing a second time:
#   1. .venv with the locked dependencies and the project, editable, its compiled WGL search
#      built with it (redone when pyproject.toml, requirements.lock or that search changes)
#   2. Java >= 17 for Spark
#   3. a Docker engine that answers (Debian's docker.io, dockerd started) and Compose (v2 or v1)
#   4. the local base image and the images of the systems under test (cached by content);
#      the Fluss image's jars come from Maven Central, fetched once and checked against
#      sut/fluss/jars.lock
# Everything it prints goes to stderr, so the command it wraps owns stdout.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STATE="$ROOT/.leaseline"
mkdir -p "$STATE"

say() { printf '\033[1;34m==>\033[0m %s\n' "$*" >&2; }
die() { printf 'leaseline setup: %s\n' "$*" >&2; exit 255; }

APT_UPDATED=0
apt_install() {
    [ "$(id -u)" = 0 ] || die "installing $* needs root (run as root or install it yourself)."
    if [ "$APT_UPDATED" = 0 ]; then
        say "apt-get update"
        apt-get update -qq >"$STATE/apt.log" 2>&1 || die "apt-get update failed (see $STATE/apt.log)."
        APT_UPDATED=1
    fi
    say "installing Debian packages: $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" \
        >>"$STATE/apt.log" 2>&1 || die "apt-get install $* failed (see $STATE/apt.log)."
}

# 1. Python environment ------------------------------------------------------------------
# Exactly the versions of requirements.lock (hash-checked; scripts/lock.sh makes it), then
# the project itself, editable, without resolving anything again. Installing it builds the
# compiled WGL search (checkers/wgl_compiled.pyx: Cython from PyPI, g++ and Python's headers
# from Debian); it is optional, so where it does not build the checker runs the pure-Python
# search and says so. Redone when pyproject.toml, the lock or any compiled source (.pyx,
# .hpp) changes: an editable install keeps the built modules beside their sources, so after
# a pull the old module would otherwise still be imported.
want="$(cd "$ROOT" && cat pyproject.toml requirements.lock \
    $(git ls-files '*.pyx' '*.hpp' 2>/dev/null || ls -- */*.pyx */*.hpp */*/*.pyx) \
    | sha256sum | cut -d' ' -f1)"
if [ ! -x "$VENV/bin/python" ] || [ "$(cat "$VENV/.deps-hash" 2>/dev/null)" != "$want" ]; then
    command -v python3 >/dev/null || apt_install python3 python3-venv
    python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))' || die "Python 3.11 or newer is needed."
    python3 -m venv --help >/dev/null 2>&1 || apt_install python3-venv
    py_include="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"
    if { ! command -v g++ >/dev/null || [ ! -f "$py_include/Python.h" ]; } && [ "$(id -u)" = 0 ]; then
        apt_install build-essential python3-dev
    fi
    say "creating $VENV and installing dependencies (first time: a few minutes)"
    [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV" || die "could not create $VENV."
    "$VENV/bin/pip" install -q --upgrade pip >"$STATE/pip.log" 2>&1 || true
    "$VENV/bin/pip" install -q --require-hashes -r "$ROOT/requirements.lock" >>"$STATE/pip.log" 2>&1 \
        || die "installing requirements.lock failed (see $STATE/pip.log)."
    "$VENV/bin/pip" install -q --no-deps -e "$ROOT" >>"$STATE/pip.log" 2>&1 \
        || die "pip install -e failed (see $STATE/pip.log)."
    "$VENV/bin/python" -c 'import leaseline.checkers.wgl_compiled' 2>/dev/null \
        || printf 'leaseline setup: warning: the compiled WGL search did not build (see %s); the checker will use the slower pure-Python search.\n' \
            "$STATE/pip.log" >&2
    echo "$want" >"$VENV/.deps-hash"
fi

# 2. Java for Spark ----------------------------------------------------------------------
java_major() { java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1; }
if ! command -v java >/dev/null || [ "$(java_major)" -lt 17 ]; then
    apt_install openjdk-17-jre-headless
fi

# 3. Docker engine -----------------------------------------------------------------------
if ! docker info >/dev/null 2>&1; then
    command -v dockerd >/dev/null || apt_install docker.io
    command -v docker >/dev/null || apt_install docker.io
    if ! docker info >/dev/null 2>&1; then
        say "starting dockerd"
        # setsid: the engine must outlive this script (and the test run that called it).
        setsid nohup dockerd >"$STATE/dockerd.log" 2>&1 </dev/null &
        for _ in $(seq 1 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
        docker info >/dev/null 2>&1 || die "dockerd did not start (see $STATE/dockerd.log)."
    fi
fi
# Compose: the v2 plugin (`docker compose`) or `docker-compose`; when neither is there,
# Debian's docker-compose package (v1 on bookworm, v2 from trixie on).
if ! docker compose version >/dev/null 2>&1 && ! command -v docker-compose >/dev/null; then
    apt_install docker-compose
fi
command -v debootstrap >/dev/null || apt_install debootstrap

# 4. Images (base + systems under test); cached, so this is quick after the first time ----
# The Fluss image is built from the release's jars: fetched into the user's cache when
# missing (about 160 MB, once), checked against their pinned sha256, hard-linked into its
# build folder; with the folder complete this only compares inodes.
command -v mvn >/dev/null || apt_install maven  # fetches them (Maven's own client)
"$VENV/bin/python" -m leaseline.sut.fluss.jars "$ROOT/sut/fluss/jars" \
    || die "fetching the Fluss jars failed (see above)."
"$VENV/bin/leaseline" images build --quiet >&2 || die "building the images failed (see above)."
