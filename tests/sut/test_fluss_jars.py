"""The Fluss image's jars: pinned by sha256, fetched once, refused when they differ.

A Maven repository laid out in a temporary folder (file:// URLs) stands in for Maven
Central; the real fetch is exercised by scripts/setup.sh on every machine.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from sut.fluss import jars
from sut.fluss.jars import Jar, JarProblem


def _publish(repo: Path, jar: Jar, content: bytes) -> None:
    path = repo / jar.rel_path
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    path.with_name(path.name + ".sha1").write_text(hashlib.sha1(content).hexdigest() + "\n")


def _pinned(content: bytes, version: str = "1.0") -> Jar:
    return Jar("org.example", "thing", version, hashlib.sha256(content).hexdigest())


def test_the_lock_pins_every_jar_and_one_fluss_release() -> None:
    lock = jars.read_lock()
    assert {j.artifact for j in lock} >= {"fluss-server", "fluss-client", "log4j-slf4j-impl"}
    assert all(j.sha256 and len(j.sha256) == 64 for j in lock)
    assert {j.version for j in lock if j.group == jars.FLUSS_GROUP} == {jars.pinned_version()}


def test_another_release_replaces_only_the_fluss_jars_and_unpins_them() -> None:
    lock = jars.read_lock()
    other = jars.wanted("0.8.0-incubating", lock)
    fluss = [j for j in other if j.group == jars.FLUSS_GROUP]
    assert fluss and all(j.version == "0.8.0-incubating" and j.sha256 is None for j in fluss)
    assert [j for j in other if j.group != jars.FLUSS_GROUP] == [
        j for j in lock if j.group != jars.FLUSS_GROUP]
    assert jars.wanted(jars.pinned_version(lock), lock) == lock


def test_a_pinned_jar_is_fetched_once_and_then_served_from_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.m2 shortcut
    repo, cache = tmp_path / "repo", tmp_path / "cache"
    jar = _pinned(b"jar bytes")
    _publish(repo, jar, b"jar bytes")
    got = jars.fetch(jar, cache, repo=repo.as_uri())
    assert got.read_bytes() == b"jar bytes"
    (repo / jar.rel_path).unlink()  # a second fetch must not need the repository
    assert jars.fetch(jar, cache, repo=repo.as_uri()) == got


def test_a_jar_that_differs_from_its_pin_is_refused_and_not_cached(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo, cache = tmp_path / "repo", tmp_path / "cache"
    jar = _pinned(b"the real jar")
    _publish(repo, jar, b"something else")
    with pytest.raises(JarProblem, match="sha256"):
        jars.fetch(jar, cache, repo=repo.as_uri())
    assert not (cache / jar.rel_path).exists()


def test_an_unpinned_jar_is_checked_against_the_published_sha1(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    repo, cache = tmp_path / "repo", tmp_path / "cache"
    jar = Jar("org.example", "thing", "2.0", None)
    _publish(repo, jar, b"fine")
    assert jars.fetch(jar, cache, repo=repo.as_uri()).read_bytes() == b"fine"
    bad = Jar("org.example", "other", "2.0", None)
    _publish(repo, bad, b"fine")
    (repo / bad.rel_path).write_bytes(b"broken in transfer")
    with pytest.raises(JarProblem, match="sha1"):
        jars.fetch(bad, cache, repo=repo.as_uri())


def test_a_missing_release_is_one_sentence(tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    jar = Jar("org.example", "thing", "9.9", None)
    with pytest.raises(JarProblem, match="does not exist|failed"):
        jars.fetch(jar, tmp_path / "cache", repo=(tmp_path / "repo").as_uri())


FAKE_MVN = """#!/usr/bin/env python3
# Stands in for Maven: puts the artifact's bytes where -Dmaven.repo.local says, and refuses
# to run without strict checksums.
import sys
from pathlib import Path
args = dict(a[2:].split("=", 1) for a in sys.argv[1:] if a.startswith("-D"))
if "-C" not in sys.argv or args.get("transitive") != "false":
    sys.exit("[ERROR] called without -C or with transitive dependencies")
group, artifact, version, _ = args["artifact"].split(":")
path = (Path(args["maven.repo.local"]) / group.replace(".", "/") / artifact / version
        / f"{artifact}-{version}.jar")
path.parent.mkdir(parents=True, exist_ok=True)
path.write_bytes(b"from maven")
"""


def test_without_a_repository_maven_fetches_and_the_pin_still_decides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text(FAKE_MVN)
    (bin_dir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LEASELINE_MAVEN_REPO", raising=False)
    got = jars.fetch(_pinned(b"from maven"), tmp_path / "cache")
    assert got.read_bytes() == b"from maven"
    assert (tmp_path / "home" / ".m2" / "repository" / _pinned(b"").rel_path).is_file()
    with pytest.raises(JarProblem, match="sha256"):
        jars.fetch(_pinned(b"what the lock pins", "2.0"), tmp_path / "cache")


def test_a_release_maven_cannot_find_is_one_sentence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # what Maven prints (coloured) when Central has no such release
    (bin_dir / "mvn").write_text(
        "#!/bin/sh\necho '\033[1;31m[ERROR]\033[m Failed to execute goal ... Could not find "
        "artifact org.apache.fluss:fluss-server:jar:0.9.0-incubating in central'\nexit 1\n")
    (bin_dir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("LEASELINE_MAVEN_REPO", raising=False)
    jar = Jar("org.apache.fluss", "fluss-server", "0.9.0-incubating", None)
    with pytest.raises(JarProblem) as e:
        jars.fetch(jar, tmp_path / "cache")
    assert str(e.value) == ("org.apache.fluss:fluss-server:0.9.0-incubating is in none of the "
                            "Maven repositories this machine reaches (is 0.9.0-incubating a "
                            "release?).")
