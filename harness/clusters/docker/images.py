"""Builds every image locally: no registry is reachable, so nothing is ever pulled.

The base image is a minimal Debian made by debootstrap and `docker import`ed under
BASE_TAG. Every other image is built FROM it from a folder under contexts/, and labelled
with a hash of that folder: when the label matches, the build is skipped entirely.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from docker.errors import BuildError, ImageNotFound

from harness.clusters.docker.client import client
from harness.errors import EnvironmentProblem
from harness.shipped import shipped
from harness.systems.profile import StagedFolder

CONTEXTS_DIR = shipped(__package__, "contexts")
BASE_TAG = "leaseline/base:bookworm"
HASH_LABEL = "io.leaseline.context-hash"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def debian_mirror() -> str:
    """The host's own Debian mirror (so debootstrap goes where apt already goes)."""
    if env := os.environ.get("LEASELINE_DEBIAN_MIRROR"):
        return env
    sources = [Path("/etc/apt/sources.list"), *Path("/etc/apt/sources.list.d").glob("*")]
    for path in sources:
        try:
            text = path.read_text()
        except OSError:
            continue
        for m in re.finditer(r"(?:^deb\s+(?:\[[^]]*\]\s+)?|^URIs:\s*)(\S+/debian)/?\s", text, re.M):
            return m.group(1)
    return DEFAULT_MIRROR


def image_exists(tag: str) -> bool:
    try:
        client().images.get(tag)
        return True
    except ImageNotFound:
        return False


def build_base(log: Callable[[str], None] = print) -> None:
    if image_exists(BASE_TAG):
        return
    if not shutil.which("debootstrap"):
        raise EnvironmentProblem("debootstrap is not installed; run scripts/setup.sh first.")
    mirror = debian_mirror()
    log(f"building {BASE_TAG} with debootstrap from {mirror} (once; about a minute)")
    with tempfile.TemporaryDirectory(prefix="leaseline-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        r = subprocess.run(
            ["debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror],
            capture_output=True,
            text=True,
        )
        if r.returncode != 0:
            tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
            raise EnvironmentProblem(f"debootstrap failed: {' | '.join(tail)}")
        # Inside images apt must reach the same mirror the host uses.
        (rootfs / "etc/apt/sources.list").write_text(f"deb {mirror} bookworm main\n")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imp = subprocess.run(
            ["docker", "import", "--change", "ENV DEBIAN_FRONTEND=noninteractive", "-", BASE_TAG],
            stdin=tar.stdout,
            capture_output=True,
            text=True,
        )
        tar.wait()
        if imp.returncode != 0:
            raise EnvironmentProblem(
                f"docker import of the base image failed: {imp.stderr.strip()}"
            )


def context_hash(context: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(
        p for p in context.rglob("*") if p.is_file() and "__pycache__" not in p.parts
    ):
        h.update(str(path.relative_to(context)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def image_contexts() -> dict[str, Path]:
    """tag -> build context, one per folder with a Dockerfile under contexts/ (the harness's
    helpers and the shipped systems' servers) or sut/ (the systems whose code lives in this
    repository, e.g. sut/leasekv)."""
    dirs = [*sorted(CONTEXTS_DIR.iterdir()), *sorted(shipped("sut").iterdir())]
    return {f"leaseline/{d.name}:latest": d for d in dirs if (d / "Dockerfile").is_file()}


def build_image(tag: str, context: Path, log: Callable[[str], None] = print) -> bool:
    """Builds tag from context unless an image with the same context hash exists. True if built."""
    digest = context_hash(context)
    try:
        if client().images.get(tag).labels.get(HASH_LABEL) == digest:
            return False
    except ImageNotFound:
        pass
    log(f"building {tag}")
    try:
        client().images.build(
            path=str(context), tag=tag, labels={HASH_LABEL: digest}, rm=True, forcerm=True
        )
    except BuildError as e:
        lines = [str(chunk.get("stream", chunk.get("error", ""))).strip() for chunk in e.build_log]
        tail = " | ".join(line for line in lines if line)[-600:]
        raise EnvironmentProblem(f"building {tag} failed: {tail}") from None
    return True


STAGED = "staged.txt"


def unstaged(context: Path) -> str | None:
    """What a context still lacks, from its staged.txt ("PATH  how to stage it" a line):
    files a command of the system's own puts there (the Fluss jars, fetched from Maven
    Central by scripts/setup.sh) and that a wheel does not carry; None when complete."""
    spec = context / STAGED
    if not spec.is_file():
        return None
    for line in spec.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        path, _, how = line.partition(" ")
        target = context / path
        if not (target.is_file() or (target.is_dir() and any(target.iterdir()))):
            return f"{target} is not staged ({how.strip()})"
    return None


def fill_folders(folders: list[StagedFolder], log: Callable[[str], None] = print
                 ) -> dict[str, str]:
    """Runs each folder's command (e.g. fetching another release's jars) and returns the
    compose variables naming the folders; a failing command's last line is the error."""
    env = {}
    for f in folders:
        log(f"staging {f.folder}")
        try:
            r = subprocess.run(f.command, capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired:
            raise EnvironmentProblem(f"staging {f.folder} did not finish in time.") from None
        if r.returncode != 0:
            lines = [ln for ln in r.stderr.splitlines() if ln.strip()] or [f"exit {r.returncode}"]
            raise EnvironmentProblem(lines[-1].removeprefix("leaseline: "))
        env[f.env] = str(f.folder)
    return env


def build_all(log: Callable[[str], None] = print) -> list[str]:
    """The base image and every context's image that changed; a context whose staged files
    are missing is left out with one line (its system's runs need them, the others not)."""
    build_base(log)
    built = []
    for tag, ctx in image_contexts().items():
        if missing := unstaged(ctx):
            log(f"skipping {tag}: {missing}")
        elif build_image(tag, ctx, log):
            built.append(tag)
    return built
