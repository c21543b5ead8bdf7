"""Builds the Fluss servers and client from a Fluss checkout with Maven, once per checkout
state, into a folder of jars the cluster mounts like a distribution's lib/ (`--sut-opt
source=DIR`, harness/systems/fluss.py names the folder by the checkout's commit).

The user's checkout is never written to: its files (tracked and untracked, not the ignored
ones such as target/) are copied beside the output folder and built there with

    mvn -B -DskipTests -pl fluss-server,fluss-client -am package

(plugins and dependencies from wherever this machine's Maven fetches them; the local
repository makes later builds work offline). Two things are changed in the copy, and only
when the checkout has them: fluss-common's test-scoped dependency on
`org.apache.hudi:hudi-flink1.20-bundle`, which Maven Central does not have, is taken out of
fluss-common/pom.xml, and its one test (HudiBucketingFunctionTest.java) is deleted, since it
would no longer compile. Test scope: neither is in any jar the servers or the client run.
Checkstyle, spotless and the license check are skipped (they read the sources and produce
nothing). The folder then holds the shaded fluss-server and fluss-client jars, log4j's
slf4j binding (pinned in jars.lock, fetched as jars.py fetches it) so the servers log, and
BUILD.txt saying what was built and how.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from leaseline.sut.fluss import jars

MODULES = ("fluss-server", "fluss-client")
MAVEN = ("mvn", "-B", "-DskipTests", "-Dcheckstyle.skip", "-Dspotless.check.skip=true",
         "-Drat.skip=true", "-pl", ",".join(MODULES), "-am", "package")
HUDI = re.compile(r"\s*<dependency>\s*<groupId>org\.apache\.hudi</groupId>\s*"
                  r"<artifactId>hudi-flink1\.20-bundle</artifactId>.*?</dependency>", re.S)
HUDI_TEST = "fluss-common/src/test/java/org/apache/fluss/bucketing/HudiBucketingFunctionTest.java"
BUILD_TIMEOUT_S = 3000.0
LOG_JARS = ("log4j-slf4j-impl", "log4j-core", "log4j-api")


class BuildProblem(Exception):
    """The build could not be made (one sentence)."""


def git(source: Path, *args: str) -> str:
    r = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildProblem(f"{source} is not a git checkout of Fluss (git {args[0]}: "
                           f"{(r.stderr.strip().splitlines() or ['failed'])[-1]}).")
    return r.stdout


def is_built(out: Path) -> bool:
    return (out / "BUILD.txt").is_file() and any(out.glob("fluss-server-*.jar")) and \
        any(out.glob("fluss-client-*.jar"))


def copy_checkout(source: Path, into: Path) -> int:
    """The checkout's tracked and untracked (not ignored) files, as they are now; how many."""
    names = git(source, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    n = 0
    for name in filter(None, names.split("\0")):
        src = source / name
        if not src.is_file():  # deleted in the work tree, or a submodule
            continue
        dest = into / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest, follow_symlinks=False)
        n += 1
    return n


def overlay(root: Path) -> list[str]:
    """Leaves out what Maven Central lacks (see the module docstring); what was changed."""
    changed = []
    pom = root / "fluss-common" / "pom.xml"
    if pom.is_file():
        text = pom.read_text()
        new, n = HUDI.subn("", text)
        if n:
            pom.write_text(new)
            changed.append("fluss-common/pom.xml: the test-scoped dependency "
                           "org.apache.hudi:hudi-flink1.20-bundle taken out")
    test = root / HUDI_TEST
    if test.is_file():
        test.unlink()
        changed.append(f"{HUDI_TEST}: deleted (it needs that dependency)")
    return changed


def first_error(log: str) -> str:
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in log.splitlines()]
    errors = [ln.removeprefix("[ERROR] ").strip() for ln in lines if ln.startswith("[ERROR]")]
    errors = [e for e in errors if e and not e.startswith(("->", "To see", "Re-run",
                                                           "For more", "Help 1"))]
    return (errors[0] if errors else (lines[-1] if lines else "no output"))[:400]


def module_jar(root: Path, module: str) -> Path:
    """The module's main jar: the shaded one, which Maven's shade plugin puts in the main
    jar's place (the plain one becomes original-*.jar)."""
    found = [p for p in (root / module / "target").glob(f"{module}-*.jar")
             if not p.name.endswith(("-tests.jar", "-sources.jar", "-javadoc.jar"))]
    if not found:
        raise BuildProblem(f"the build made no {module}/target/{module}-*.jar.")
    return found[0]


def build(source: Path, out: Path, log: Callable[[str], None] = lambda m: None) -> Path:
    """The folder of jars for the checkout (built unless it is there already)."""
    if is_built(out):
        return out
    if not (source / "pom.xml").is_file() or not all((source / m).is_dir() for m in MODULES):
        raise BuildProblem(f"{source} is not a Fluss checkout (no pom.xml with fluss-server and "
                           "fluss-client beside it).")
    if shutil.which("mvn") is None:
        raise BuildProblem("building Fluss from source needs Maven (mvn), which is not "
                           "installed.")
    commit = git(source, "rev-parse", "HEAD").strip()
    dirty = bool(git(source, "status", "--porcelain", "--untracked-files=normal").strip())
    work = out.with_name(out.name + ".work")
    shutil.rmtree(work, ignore_errors=True)
    root = work / "fluss"
    root.mkdir(parents=True)
    log(f"copying {source} ({commit[:12]}{', with uncommitted changes' if dirty else ''})")
    copy_checkout(source, root)
    changed = overlay(root)
    build_log = out.with_name(out.name + ".build.log")
    command = " ".join(MAVEN)
    log(f"building Fluss {commit[:12]}: {command} (log: {build_log})")
    try:
        with build_log.open("w") as fh:
            r = subprocess.run(["nice", "-n", "10", *MAVEN], cwd=root, stdout=fh,
                               stderr=subprocess.STDOUT, timeout=BUILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise BuildProblem(f"`{command}` in a copy of {source} did not finish in "
                           f"{BUILD_TIMEOUT_S:.0f} s (log: {build_log}).") from None
    if r.returncode != 0:
        raise BuildProblem(f"`{command}` in a copy of {source} failed: "
                           f"{first_error(build_log.read_text(errors='replace'))} "
                           f"(log: {build_log}).")
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for module in MODULES:
        shutil.copy2(module_jar(root, module), tmp)
    for jar in jars.read_lock():
        if jar.artifact in LOG_JARS:
            shutil.copy2(jars.fetch(jar, log=log), tmp / jar.file_name)
    (tmp / "BUILD.txt").write_text(
        f"source: {source}\ncommit: {commit}\nuncommitted changes: {'yes' if dirty else 'no'}\n"
        f"command: {command}\n"
        + "".join(f"changed in the copy: {c}\n" for c in changed or ["nothing"]))
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    shutil.rmtree(work, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m leaseline.sut.fluss.source_build",
        description="Build Fluss's servers and client from a checkout (once per commit).")
    parser.add_argument("source", type=Path, help="the Fluss checkout (never written to)")
    parser.add_argument("out", type=Path, help="the folder the jars go to")
    args = parser.parse_args(argv)
    try:
        build(args.source.resolve(), args.out,
              log=lambda m: print(f"==> {m}", file=sys.stderr))
    except (BuildProblem, jars.JarProblem) as e:
        print(f"leaseline: {e}", file=sys.stderr)
        return 255
    return 0


if __name__ == "__main__":
    sys.exit(main())
