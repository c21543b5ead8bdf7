"""The image of a described system (harness/systems/system_file.py, `[image]`), made locally:
an image already on this machine, a build folder, a binary (with the files beside it)
wrapped into an image FROM the local base image, or a source checkout built with the
user's own toolchain on this machine and then wrapped the same way.

Wrapped and built images are tagged by a hash of what went into them, so parallel runs
with different builds never share a tag and an unchanged build is not repeated; a source
build is cached by the checkout's state (its commit, its uncommitted changes).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from leaseline.harness.clusters.docker import images
from leaseline.harness.errors import BadArguments, EnvironmentProblem
from leaseline.harness.systems.system_file import ImageSpec, SystemDescription
from leaseline.harness.systems.templates import TemplateProblem
from leaseline.harness.user_cache import USER_CACHE

BUILD_CACHE = USER_CACHE / "builds"
BUILD_TIMEOUT_S = 1800.0


def _file_hash(paths: dict[str, Path]) -> str:
    h = hashlib.sha256()
    for name, path in sorted(paths.items()):
        h.update(name.encode() + b"\0")
        with path.open("rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
    return h.hexdigest()[:16]


def wrap_files(system: str, files: dict[str, Path], log: Callable[[str], None]) -> str:
    """An image FROM the base image with `files` in /usr/local/bin; its tag."""
    images.build_base(log)
    digest = _file_hash(files)
    tag = f"leaseline/sys-{system}:{digest}"
    if images.image_exists(tag):
        return tag
    with tempfile.TemporaryDirectory(prefix="leaseline-wrap-") as tmp:
        ctx = Path(tmp)
        for name, path in files.items():
            shutil.copy2(path, ctx / name)
            (ctx / name).chmod(0o755)
        (ctx / "Dockerfile").write_text(
            f"FROM {images.BASE_TAG}\nCOPY {' '.join(sorted(files))} /usr/local/bin/\n")
        images.build_image(tag, ctx, log)
    return tag


def _source_state(source: Path) -> str:
    """A hash of the checkout as it is now: commit plus uncommitted changes (git), or every
    file's content."""
    h = hashlib.sha256()
    git = ["git", "-C", str(source)]
    head = (subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True)
            if shutil.which("git") else None)
    if head is not None and head.returncode == 0:
        h.update(head.stdout.encode())
        h.update(subprocess.run([*git, "diff", "HEAD", "--binary"], capture_output=True).stdout)
        others = subprocess.run([*git, "ls-files", "-z", "--others", "--exclude-standard"],
                                capture_output=True).stdout.split(b"\0")
        for name in sorted(o for o in others if o):
            h.update(name)
            path = source / name.decode(errors="replace")
            if path.is_file():
                h.update(path.read_bytes())
        return h.hexdigest()[:16]
    for path in sorted(p for p in source.rglob("*") if p.is_file() and ".git" not in p.parts):
        h.update(str(path.relative_to(source)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def build_source(system: str, spec: ImageSpec, opts: dict[str, str],
                 log: Callable[[str], None]) -> Path:
    """Runs the build commands in the checkout (once per source state); the output folder."""
    source = Path(spec.value)
    # the commands as filled in (options may change them) are part of what is cached
    recipe = hashlib.sha256(repr([c.args({"out": "OUT"} | {f"opt.{k}": v for k, v in
                                                           opts.items()})
                                  for c in spec.build]).encode()).hexdigest()[:8]
    out = BUILD_CACHE / f"{system}-{_source_state(source)}-{recipe}"
    wanted = [Path(spec.exe).name, *spec.files]
    if all((out / f).is_file() for f in wanted):
        return out
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    values = {"out": str(tmp)} | {f"opt.{k}": v for k, v in opts.items()}
    for command in spec.build:
        try:
            argv = command.args(values)
        except TemplateProblem as e:
            raise EnvironmentProblem(f"{system}: a build command {e}.") from None
        log(f"building {system} from {source}: {' '.join(argv)[:120]}")
        try:
            r = subprocess.run(argv, cwd=source, capture_output=True, text=True,
                               timeout=BUILD_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise EnvironmentProblem(f"building {system} from {source} failed: {e}.") from None
        if r.returncode != 0:
            tail = " | ".join((r.stdout + r.stderr).strip().splitlines()[-3:])
            raise EnvironmentProblem(f"building {system} from {source} failed: {tail[-400:]}")
    missing = [f for f in wanted if not (tmp / f).is_file()]
    if missing:
        raise EnvironmentProblem(f"building {system} from {source} made no {missing[0]} in the "
                                 "output folder.")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return out


def check_named_image(desc: SystemDescription) -> None:
    """An image given by name must be in this machine's Docker already: a wrong name is an
    argument problem (254), which `validate` finds before anything starts."""
    spec = desc.image
    if spec.source == "name" and not images.image_exists(spec.value):
        raise BadArguments(f"the image {spec.value} is not in this machine's Docker "
                           "(Leaseline never pulls: build or load it first).")


def system_image(desc: SystemDescription, log: Callable[[str], None]
                 ) -> tuple[str, dict[str, Path]]:
    """The image's tag, and the image's files as found on this machine ({file.NAME})."""
    spec = desc.image
    tools = {f: Path(spec.tools) / f for f in spec.files}
    if spec.source == "name":
        check_named_image(desc)
        return spec.value, tools
    if spec.source == "build":
        ctx = Path(spec.value)
        images.build_base(log)
        # A folder of this project's own (sut/leasekv) keeps the name `images build` gives it.
        shipped = {path.resolve(): name for name, path in images.image_contexts().items()}
        tag = images.content_tag(shipped.get(ctx.resolve(), f"sys-{desc.name}"), ctx)
        images.build_image(tag, ctx, log)
        return tag, tools
    if spec.source == "binary":
        binary = Path(spec.value)
        beside = {f: binary.parent / f for f in spec.files}
        files = {binary.name: binary} | {f: p if p.is_file() else tools[f]
                                         for f, p in beside.items()}
    else:
        out = build_source(desc.name, spec, desc.opts, log)
        files = {Path(spec.exe).name: out / Path(spec.exe).name} | {f: out / f for f in spec.files}
    tag = wrap_files(desc.name, files, log)
    return tag, {f: files[f] for f in spec.files}
