"""The images' pip requirement files, made from the project's lock (requirements.lock).

Each image folder that installs Python packages names the packages it needs in
requirements-image.in; its requirements-image.txt is those packages and everything they
depend on, with the lock's versions and hashes, for the image's Python (Debian bookworm's
CPython 3.11 on Linux). So the Spark executors run the pyspark the driver's .venv runs, and
leasekv the versions the tests ran against. scripts/lock.sh runs this after relocking;
tests/test_lock.py fails when a committed file differs from what this makes.

    python scripts/image_requirements.py          # rewrite the files
    python scripts/image_requirements.py --check  # exit 1 when one is out of date
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "requirements.lock"
IMAGE_DIRS = (ROOT / "harness" / "clusters" / "docker" / "contexts" / "spark",
              ROOT / "sut" / "leasekv")
# The images' interpreter: Debian bookworm's python3, on Linux.
IMAGE_PYTHON = {
    "python_version": "3.11",
    "python_full_version": "3.11.2",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "os_name": "posix",
    "platform_system": "Linux",
}
HEADER = (
    "# Made by scripts/image_requirements.py from requirements.lock and requirements-image.in\n"
    "# (scripts/lock.sh runs it); do not edit. Installed with --require-hashes (see the\n"
    "# Dockerfile).\n"
)


@dataclass
class Pin:
    name: str
    line: str  # "name==version", marker dropped (evaluated for the image instead)
    marker: str
    hashes: list[str] = field(default_factory=list)
    via: list[str] = field(default_factory=list)


def read_lock(text: str) -> list[Pin]:
    """The lock's entries, in order: a `name==version [; marker] \\` line, its hash lines and
    the `# via` comment naming the packages that need it."""
    pins: list[Pin] = []
    in_via = False
    for raw in text.splitlines():
        line = raw.strip()
        if m := re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)\s*(?:;\s*(.*?))?\s*\\?$", raw):
            pins.append(Pin(canonicalize_name(m[1]), f"{m[1]}=={m[2]}", m[3] or ""))
            in_via = False
        elif line.startswith("--hash=") and pins:
            pins[-1].hashes.append(line.rstrip(" \\"))
        elif line.startswith("# via") and pins:
            rest = line.removeprefix("# via").strip()
            pins[-1].via += [rest] if rest else []
            in_via = not rest
        elif in_via and line.startswith("#   ") and pins:
            pins[-1].via.append(line.removeprefix("#").strip())
        else:
            in_via = False
    for pin in pins:  # "leaseline (pyproject.toml)" -> "leaseline"; extras dropped
        pin.via = [canonicalize_name(re.split(r"[\s\[]", v, maxsplit=1)[0]) for v in pin.via]
    return pins


def read_roots(path: Path) -> list[str]:
    return [canonicalize_name(ln.split("#", 1)[0].strip())
            for ln in path.read_text().splitlines() if ln.split("#", 1)[0].strip()]


def image_requirements(lock_text: str, roots: list[str]) -> str:
    """The requirement file of an image that needs `roots`: those and their dependencies."""
    pins = [p for p in read_lock(lock_text)
            if not p.marker or Marker(p.marker).evaluate(IMAGE_PYTHON)]
    names = {p.name for p in pins}
    if missing := [r for r in roots if r not in names]:
        raise SystemExit(f"not in requirements.lock: {', '.join(missing)}")
    needed = set(roots)
    while True:
        more = {p.name for p in pins if p.name not in needed and needed & set(p.via)}
        if not more:
            break
        needed |= more
    body = "".join(
        f"{p.line} \\\n" + " \\\n".join(f"    {h}" for h in p.hashes) + "\n"
        for p in pins if p.name in needed
    )
    return HEADER + body


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="only say which files are stale")
    args = ap.parse_args()
    lock_text = LOCK.read_text()
    stale = []
    for folder in IMAGE_DIRS:
        out = folder / "requirements-image.txt"
        text = image_requirements(lock_text, read_roots(folder / "requirements-image.in"))
        if out.is_file() and out.read_text() == text:
            continue
        stale.append(out.relative_to(ROOT))
        if not args.check:
            out.write_text(text)
    for path in stale:
        print(f"{path} {'is out of date' if args.check else 'rewritten'}", file=sys.stderr)
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
