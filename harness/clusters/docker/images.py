"""Builds every image locally: no registry is reachable, so nothing is ever pulled.

The base image is a minimal Debian made by debootstrap and `docker import`ed under
BASE_TAG. Every other image is built FROM it from a folder (contexts/ or sut/) and tagged
by a hash of that folder, leaseline/<folder>:<hash>: two checkouts (or two CI jobs of
different commits on one machine) whose folders differ never overwrite each other's image,
the same folder is built once, and a cluster boots the image of the code it runs. This
module is the one place that says what a folder's tag is (context_tag, compose_env).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from docker.errors import APIError, ImageNotFound

from leaseline.harness.clusters.docker.client import client
from leaseline.harness.errors import EnvironmentProblem
from leaseline.harness.shipped import shipped
from leaseline.harness.systems.profile import StagedFolder

CONTEXTS_DIR = shipped(__package__, "contexts")
BASE_TAG = "leaseline/base:bookworm"
HASH_LABEL = "io.leaseline.context-hash"
# Which install's contexts an image was built from: `images prune` removes only its own.
CHECKOUT_LABEL = "io.leaseline.checkout"
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


def _files(context: Path) -> list[Path]:
    return sorted(p for p in context.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


# (folder, each file's name, size and mtime) -> hash: every cluster asks for its tags, and
# a staged context (the Fluss jars) is too large to read each time. A file changed in the
# last RACY_NS may change again within the clock's granularity with the same size and mtime,
# so a folder holding one is hashed afresh (as git treats its index).
_hashes: dict[tuple[object, ...], str] = {}
RACY_NS = 2_000_000_000


def context_hash(context: Path) -> str:
    """16 hex digits of a hash of every file's path and content under the folder."""
    files = _files(context)
    stats = [p.stat() for p in files]
    stamp = (str(context.resolve()),
             *((str(p), st.st_size, st.st_mtime_ns) for p, st in zip(files, stats, strict=True)))
    if (known := _hashes.get(stamp)) is not None:
        return known
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.relative_to(context)).encode())
        h.update(path.read_bytes())
    digest = h.hexdigest()[:16]
    if all(st.st_mtime_ns < time.time_ns() - RACY_NS for st in stats):
        _hashes[stamp] = digest
    return digest


def content_tag(name: str, context: Path) -> str:
    """The tag of the image built from `context`: leaseline/<name>:<its hash>."""
    return f"leaseline/{name}:{context_hash(context)}"


def image_contexts() -> dict[str, Path]:
    """name -> build context, one per folder with a Dockerfile under contexts/ (the harness's
    helpers and the shipped systems' servers) or sut/ (the systems whose code lives in this
    repository, e.g. sut/leasekv)."""
    dirs = [*sorted(CONTEXTS_DIR.iterdir()), *sorted(shipped("leaseline.sut").iterdir())]
    return {d.name: d for d in dirs if (d / "Dockerfile").is_file()}


def context_tag(name: str) -> str:
    """The tag of the shipped context `name` (e.g. redis) as its folder is now."""
    contexts = image_contexts()
    if name not in contexts:
        raise EnvironmentProblem(f"no build folder (contexts/ or sut/) is called {name}.")
    return content_tag(name, contexts[name])


def compose_env() -> dict[str, str]:
    """The variables the shipped docker-compose.yml names its images by: LL_IMAGE_<NAME>."""
    return {f"LL_IMAGE_{name.upper().replace('-', '_')}": content_tag(name, ctx)
            for name, ctx in image_contexts().items()}


def build_context(name: str, log: Callable[[str], None] = print) -> str:
    """The shipped context `name`'s image, built unless it exists; its tag."""
    tag = context_tag(name)
    build_image(tag, image_contexts()[name], log)
    return tag


class BuildStep(str):
    """A log line saying which step of a build runs now ("leaseline/redis:…: step 3/9 RUN …"):
    a plain line to a plain log; a live view may show it in place and drop it when the next
    comes (`leaseline images build` on a terminal)."""

    number: int
    total: int


STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)")
STEP_TEXT = 90  # characters of a step's instruction shown


def build_image(tag: str, context: Path, log: Callable[[str], None] = print) -> bool:
    """Builds tag from context unless an image with the same context hash exists. True if built.
    Each step is logged as it starts (a BuildStep), streamed from the engine's build log, so
    a build of minutes is never silent."""
    digest = context_hash(context)
    try:
        if client().images.get(tag).labels.get(HASH_LABEL) == digest:
            return False
    except ImageNotFound:
        pass
    log(f"building {tag}")
    labels = {HASH_LABEL: digest, CHECKOUT_LABEL: str(CONTEXTS_DIR.resolve())}
    recent: list[str] = []
    for chunk in client().api.build(path=str(context), tag=tag, labels=labels, rm=True,
                                    forcerm=True, decode=True):
        if "error" in chunk:
            tail = " | ".join([*recent[-5:], str(chunk["error"]).strip()])[-600:]
            raise EnvironmentProblem(f"building {tag} failed: {tail}")
        for line in str(chunk.get("stream", "")).splitlines():
            if not line.strip():
                continue
            recent = [*recent[-9:], line.strip()]
            if m := STEP.match(line):
                text = m[3] if len(m[3]) <= STEP_TEXT else m[3][: STEP_TEXT - 1] + "…"
                step = BuildStep(f"{tag}: step {m[1]}/{m[2]} {text}")
                step.number, step.total = int(m[1]), int(m[2])
                log(step)
    return True


def stale_images() -> Iterator[str]:
    """Tags of this install's context images that its folders no longer make (the folder
    changed since) and that no container, running or stopped, uses."""
    names = {f"leaseline/{name}" for name in image_contexts()}
    current = set(compose_env().values())
    used = {c.attrs.get("ImageID") for c in client().containers.list(all=True, sparse=True)}
    mine = client().images.list(filters={"label": f"{CHECKOUT_LABEL}={CONTEXTS_DIR.resolve()}"})
    for image in mine:
        if image.id in used:
            continue
        for tag in image.tags:
            if tag.rpartition(":")[0] in names and tag not in current:
                yield tag


def prune(log: Callable[[str], None] = print) -> list[str]:
    """Removes stale_images(); the tags removed. One that a container took meanwhile stays."""
    removed = []
    for tag in stale_images():
        try:
            client().images.remove(tag)
        except APIError as e:
            log(f"kept {tag}: {e.explanation or e}")
            continue
        removed.append(tag)
    return removed


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
    """The base image and every context's image not built yet (their tags); a context whose
    staged files are missing is left out with one line (its system's runs need them, the
    others not)."""
    build_base(log)
    built = []
    for name, ctx in image_contexts().items():
        if missing := unstaged(ctx):
            log(f"skipping leaseline/{name}: {missing}")
        elif build_image(tag := content_tag(name, ctx), ctx, log):
            built.append(tag)
    return built
