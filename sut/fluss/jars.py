"""The jars the Fluss image is made of, fetched from Maven Central by coordinates and
cached per user.

Maven's own client fetches them (`mvn dependency:get`, into the local Maven repository,
with strict checksums), so they come from wherever this machine's Maven is set up to go;
LEASELINE_MAVEN_REPO names a repository to read directly instead (a URL, file:// too).

jars.lock (beside this file) pins each jar's version and sha256; a pinned jar whose
content differs is refused. Another Fluss release (`--version`: `--sut-opt version=` stages
it into a folder the cluster mounts) replaces the two Fluss jars' version: those are not
pinned, so they are checked against the .sha1 Maven Central publishes beside each jar,
which guards against a broken transfer, not against a changed repository.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LOCK = Path(__file__).resolve().parent / "jars.lock"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "leaseline" / "maven"
FLUSS_GROUP = "org.apache.fluss"
TIMEOUT_S = 60.0


class JarProblem(Exception):
    """A jar could not be fetched or did not match its checksum (one sentence)."""


@dataclass(frozen=True)
class Jar:
    group: str
    artifact: str
    version: str
    sha256: str | None  # None: not pinned (checked against the repository's .sha1)

    @property
    def file_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"

    @property
    def rel_path(self) -> str:
        return f"{self.group.replace('.', '/')}/{self.artifact}/{self.version}/{self.file_name}"

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def read_lock(path: Path = LOCK) -> list[Jar]:
    jars = []
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        digest, coords = line.split()
        group, artifact, version = coords.split(":")
        jars.append(Jar(group, artifact, version, digest))
    return jars


def pinned_version(lock: list[Jar] | None = None) -> str:
    """The Fluss release the lock pins."""
    return next(j.version for j in lock or read_lock() if j.group == FLUSS_GROUP)


def wanted(version: str | None = None, lock: list[Jar] | None = None) -> list[Jar]:
    """The jars for a Fluss release: the lock's, with the Fluss jars of `version` unpinned
    when it is not the pinned one."""
    lock = lock if lock is not None else read_lock()
    if version is None or version == pinned_version(lock):
        return lock
    return [Jar(j.group, j.artifact, version, None) if j.group == FLUSS_GROUP else j
            for j in lock]


def _digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _download(url: str, dest: Path) -> None:
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as r, dest.open("wb") as f:
            shutil.copyfileobj(r, f, 1 << 20)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            raise JarProblem(f"{url} does not exist (is the version right?).") from None
        raise JarProblem(f"fetching {url} failed: HTTP {e.code}.") from None
    except (OSError, urllib.error.URLError) as e:
        raise JarProblem(f"fetching {url} failed: {e}.") from None


def _verify(jar: Jar, path: Path, repo: str, work: Path) -> None:
    if jar.sha256 is not None:
        got = _digest(path, "sha256")
        if got != jar.sha256:
            raise JarProblem(f"{jar} has sha256 {got}, not the {jar.sha256} sut/fluss/jars.lock "
                             "pins; refusing it.")
        return
    sha1_file = work / "sha1"
    _download(f"{repo}/{jar.rel_path}.sha1", sha1_file)
    want = sha1_file.read_text().split()[0].strip().lower() if sha1_file.stat().st_size else ""
    if _digest(path, "sha1") != want:
        raise JarProblem(f"{jar} does not match the .sha1 published beside it; refusing it.")


def _maven_get(jar: Jar) -> Path:
    """The jar in the local Maven repository, fetched there by Maven when it is not."""
    # Named explicitly: Maven takes its home from the password database, not $HOME.
    repository = Path.home() / ".m2" / "repository"
    local = repository / jar.rel_path
    if local.is_file():
        return local
    if shutil.which("mvn") is None:
        raise JarProblem(f"fetching {jar} needs Maven (mvn), which is not installed.")
    # -U: Maven remembers a miss and would not ask the repository again without it.
    cmd = ["mvn", "-q", "-B", "-C", "-U", "dependency:get", f"-Dartifact={jar}:jar",
           "-Dtransitive=false", f"-Dmaven.repo.local={repository}"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT_S * 10)
    except subprocess.TimeoutExpired:
        raise JarProblem(f"mvn dependency:get {jar} did not finish in time.") from None
    if r.returncode != 0 or not local.is_file():
        text = re.sub(r"\x1b\[[0-9;]*m", "", r.stdout + r.stderr)  # Maven's colours
        if "Could not find artifact" in text or "was not found in" in text:
            raise JarProblem(f"{jar} is in none of the Maven repositories this machine "
                             f"reaches (is {jar.version} a release?).")
        lines = [ln.strip() for ln in text.splitlines() if "ERROR" in ln]
        why = lines[0] if lines else f"exit {r.returncode}"
        raise JarProblem(f"mvn could not fetch {jar} (is the version right?): {why[:300]}")
    return local


def fetch(jar: Jar, cache: Path = CACHE, repo: str | None = None,
          log: Callable[[str], None] = lambda _: None) -> Path:
    """The jar's path in the cache, fetching it (and checking it) when it is not there."""
    repo = repo or os.environ.get("LEASELINE_MAVEN_REPO")
    target = cache / jar.rel_path
    if _checked_before(target):
        return target
    if target.is_file() and jar.sha256 is not None and _digest(target, "sha256") == jar.sha256:
        _remember_checked(target)
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=target.parent) as tmp:
        work = Path(tmp)
        part = work / jar.file_name
        if repo is None:
            log(f"fetching {jar} with Maven")
            shutil.copyfile(_maven_get(jar), part)
            if jar.sha256 is not None:  # an unpinned one Maven checked against its .sha1
                _verify(jar, part, "", work)
        else:
            log(f"fetching {jar} from {repo}")
            _download(f"{repo.rstrip('/')}/{jar.rel_path}", part)
            _verify(jar, part, repo.rstrip("/"), work)
        part.replace(target)
    _remember_checked(target)
    return target


def _stamp(path: Path) -> str:
    st = path.stat()
    return f"{st.st_size} {st.st_mtime_ns} {st.st_ino}"


def _checked_before(target: Path) -> bool:
    """The cached jar was checked when it arrived and has not changed since (same size,
    mtime and inode), so setup does not hash 150 MB on every run."""
    mark = target.with_name(target.name + ".checked")
    try:
        return target.is_file() and mark.read_text() == _stamp(target)
    except OSError:
        return False


def _remember_checked(target: Path) -> None:
    target.with_name(target.name + ".checked").write_text(_stamp(target))


def stage(into: Path, version: str | None = None, cache: Path = CACHE,
          log: Callable[[str], None] = lambda _: None) -> list[Path]:
    """Puts the release's jars (and only those) into the folder `into`, hard-linked from the
    cache where the file system allows (a copy is made again on every call); the staged
    paths."""
    jars = wanted(version)
    into.mkdir(parents=True, exist_ok=True)
    names = {j.file_name for j in jars}
    for old in into.glob("*.jar"):
        if old.name not in names:
            old.unlink()
    staged = []
    for jar in jars:
        src = fetch(jar, cache, log=log)
        dest = into / jar.file_name
        if not (dest.is_file() and dest.samefile(src)):
            dest.unlink(missing_ok=True)
            try:
                os.link(src, dest)
            except OSError:
                shutil.copyfile(src, dest)
        staged.append(dest)
    return staged


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sut.fluss.jars",
        description="Fetch (once, checksummed) the jars of a Fluss release into a folder.")
    parser.add_argument("into", type=Path, help="the folder the jars go to")
    parser.add_argument("--version", help=f"a Fluss release (default: {pinned_version()})")
    args = parser.parse_args(argv)
    try:
        stage(args.into, args.version, log=lambda m: print(f"==> {m}", file=sys.stderr))
    except JarProblem as e:
        print(f"leaseline: {e}", file=sys.stderr)
        return 255
    return 0


if __name__ == "__main__":
    sys.exit(main())
