"""`--sut-opt source=DIR`: Fluss built from a checkout (sut/fluss/source_build.py), with a
stand-in `mvn` on PATH that checks what it is asked to build and lays out the jars Maven's
shade plugin would (the real build is minutes long: docs/fluss-kv-scan.md has its figures),
and the Fluss profile's part (harness/systems/fluss.py): the folder named by the commit,
what test.json records, the refusals."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.fluss import Fluss
from leaseline.sut.fluss import source_build

HUDI_POM = """<project>
  <dependencies>
    <dependency>
      <groupId>org.apache.fluss</groupId>
      <artifactId>fluss-test-utils</artifactId>
    </dependency>
    <dependency>
      <groupId>org.apache.hudi</groupId>
      <artifactId>hudi-flink1.20-bundle</artifactId>
      <version>${hudi.version}</version>
      <scope>test</scope>
      <exclusions><exclusion><groupId>log4j</groupId></exclusion></exclusions>
    </dependency>
  </dependencies>
</project>
"""

# Refuses to build the user's own checkout or a copy that still needs hudi, counts its
# calls, and leaves the jars where Fluss's build does (the shaded jar under the module's
# name, the unshaded one as original-*).
FAKE_MVN = """#!/bin/sh
echo run >> "$FAKE_MVN_CALLS"
case "$PWD" in "$FAKE_SOURCE"*) echo "[ERROR] built in the user's checkout"; exit 1;; esac
if grep -q hudi-flink1.20-bundle fluss-common/pom.xml; then
  echo "[ERROR] Failed to execute goal on project fluss-common: Could not resolve dependencies"
  exit 1
fi
[ -n "$FAKE_FAIL" ] && { echo "[INFO] Building"; echo "[ERROR] $FAKE_FAIL"; exit 1; }
echo "$@" > "$FAKE_MVN_ARGS"
for m in fluss-server fluss-client; do
  mkdir -p $m/target
  echo shaded > $m/target/$m-1.0-SNAPSHOT.jar
  echo plain > $m/target/original-$m-1.0-SNAPSHOT.jar
  echo tests > $m/target/$m-1.0-SNAPSHOT-tests.jar
done
"""


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    src = tmp_path / "fluss"
    for d in ("fluss-server", "fluss-client", "fluss-common/src/test/java/org/apache/fluss/"
              "bucketing"):
        (src / d).mkdir(parents=True)
    (src / "pom.xml").write_text("<project/>\n")
    (src / "fluss-common/pom.xml").write_text(HUDI_POM)
    (src / source_build.HUDI_TEST).write_text("class HudiBucketingFunctionTest {}\n")
    (src / "fluss-server/Server.java").write_text("class Server {}\n")
    (src / ".gitignore").write_text("target/\n")
    git(src, "init", "-q")
    git(src, "add", ".")
    git(src, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "fluss")
    return src


@pytest.fixture
def fake_mvn(tmp_path: Path, checkout: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text(FAKE_MVN)
    (bin_dir / "mvn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_MVN_CALLS", str(tmp_path / "calls"))
    monkeypatch.setenv("FAKE_MVN_ARGS", str(tmp_path / "args"))
    monkeypatch.setenv("FAKE_SOURCE", str(checkout))
    logs = tmp_path / "log4j.jar"
    logs.write_text("log4j")
    monkeypatch.setattr(source_build.jars, "fetch", lambda jar, **_: logs)
    return tmp_path / "calls"


def test_the_overlay_takes_out_hudi_and_its_test_and_nothing_else(checkout: Path) -> None:
    changed = source_build.overlay(checkout)
    pom = (checkout / "fluss-common/pom.xml").read_text()
    assert "hudi" not in pom and "fluss-test-utils" in pom
    assert not (checkout / source_build.HUDI_TEST).exists()
    assert len(changed) == 2
    assert source_build.overlay(checkout) == []  # a later checkout that needs neither


def test_a_checkout_is_built_in_a_copy_once_per_commit(checkout: Path, fake_mvn: Path,
                                                       tmp_path: Path) -> None:
    out = tmp_path / "cache" / "abc"
    source_build.build(checkout, out)
    jars = sorted(p.name for p in out.glob("*.jar"))
    assert jars == ["fluss-client-1.0-SNAPSHOT.jar", "fluss-server-1.0-SNAPSHOT.jar",
                    "log4j-api-2.25.3.jar", "log4j-core-2.25.3.jar",
                    "log4j-slf4j-impl-2.25.3.jar"]
    assert (out / "fluss-server-1.0-SNAPSHOT.jar").read_text() == "shaded\n"
    args = (tmp_path / "args").read_text().split()
    assert args[-1] == "package" and "-DskipTests" in args and \
        "fluss-server,fluss-client" in args
    build_txt = (out / "BUILD.txt").read_text()
    assert git(checkout, "rev-parse", "HEAD").strip() in build_txt
    assert "hudi-flink1.20-bundle taken out" in build_txt
    # the user's checkout is as it was: nothing built, nothing changed
    assert git(checkout, "status", "--porcelain") == ""
    assert not (checkout / "fluss-server/target").exists()
    assert not out.with_name("abc.work").exists()
    source_build.build(checkout, out)
    assert fake_mvn.read_text().count("run") == 1


def test_a_failing_build_says_where_it_stopped(checkout: Path, fake_mvn: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_FAIL", "Failed to execute goal on project fluss-rpc: compile")
    out = tmp_path / "cache" / "abc"
    assert source_build.main([str(checkout), str(out)]) == 255
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("leaseline: `mvn -B -DskipTests")
    assert "failed: Failed to execute goal on project fluss-rpc: compile (log: " in err
    assert not source_build.is_built(out)


def test_a_folder_that_is_not_a_fluss_checkout_is_refused(tmp_path: Path) -> None:
    with pytest.raises(source_build.BuildProblem, match="is not a Fluss checkout"):
        source_build.build(tmp_path, tmp_path / "out")


def test_the_profile_names_the_build_by_commit_and_records_it(checkout: Path) -> None:
    commit = git(checkout, "rev-parse", "HEAD").strip()
    opts = {"source": str(checkout)}
    Fluss.check_options(opts)
    [staged] = Fluss.staged_folders(opts)
    assert staged.folder.name == commit[:12]
    assert staged.command[-2:] == (str(checkout), str(staged.folder))
    assert Fluss.build_info(opts) == {"source": str(checkout), "commit": commit,
                                      "uncommitted_changes": False,
                                      "jars": str(staged.folder)}
    (checkout / "fluss-server/Server.java").write_text("class Server { int x; }\n")
    [dirty] = Fluss.staged_folders(opts)
    assert dirty.folder.name.startswith(commit[:12] + "-") and dirty.folder != staged.folder


@pytest.mark.parametrize("opts, says", [
    ({"source": "/nonexistent/fluss"}, "is not a Fluss checkout"),
    ({"source": "SRC", "dist": "/x"}, "exclude each other"),
    ({"scanner-ttl-ms": "3s"}, "must be a whole number"),
])
def test_bad_source_options_are_one_sentence(opts: dict[str, str], says: str,
                                             checkout: Path) -> None:
    opts = {k: str(checkout) if v == "SRC" else v for k, v in opts.items()}
    with pytest.raises(BadArguments, match=says):
        Fluss.check_options(opts)


def test_a_source_named_by_a_variable_is_expanded(checkout: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LEASELINE_FLUSS_SOURCE", str(checkout))
    [staged] = Fluss.staged_folders({"source": "$LEASELINE_FLUSS_SOURCE"})
    assert staged.command[-2] == str(checkout)
    monkeypatch.delenv("LEASELINE_FLUSS_SOURCE")
    with pytest.raises(BadArguments, match=r"is not a Fluss checkout .*\(is the variable set\?\)"):
        Fluss.check_options({"source": "$LEASELINE_FLUSS_SOURCE"})
