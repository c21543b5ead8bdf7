"""--sut-opt version= and dist= of the Fluss profile: what is refused before anything boots
(one sentence, non-zero exit) and what the Docker backend is asked to mount."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from repo_paths import ROOT

from leaseline.harness.errors import BadArguments
from leaseline.harness.systems.fluss import USER_LIB_ENV, Fluss


def jars(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"PK")
    return folder


@pytest.mark.parametrize(("version", "fragment"), [
    ("0.8.0-incubating", "older than 0.9.0-incubating"),
    ("0.6.0", "older than 0.9.0-incubating"),
    ("latest", "is not a Fluss release number"),
    ("0.9", "is not a Fluss release number"),
])
def test_a_release_without_the_lease_api_or_no_release_is_refused(version: str,
                                                                  fragment: str) -> None:
    with pytest.raises(BadArguments, match=fragment):
        Fluss.check_options({"version": version})


def test_another_release_is_staged_by_the_backend_and_mounted() -> None:
    Fluss.check_options({"version": "0.9.0-incubating"})
    (staged,) = Fluss.staged_folders({"version": "0.10.0-incubating"})
    assert staged.env == USER_LIB_ENV
    assert staged.folder.name == "0.10.0-incubating"
    assert staged.command[-3:] == (str(staged.folder), "--version", "0.10.0-incubating")
    assert staged.command[1:3] == ("-m", "leaseline.sut.fluss.jars")
    assert Fluss.staged_folders({}) == []
    assert USER_LIB_ENV not in Fluss.compose_env({})  # the image's own jars


def test_a_distribution_is_its_lib_folder_or_a_folder_of_jars(tmp_path: Path) -> None:
    dist = tmp_path / "fluss-0.9.1-incubating"
    lib = jars(dist / "lib", "fluss-server-0.9.1-incubating.jar",
               "fluss-client-0.9.1-incubating.jar")
    Fluss.check_options({"dist": str(dist)})
    assert Fluss.compose_env({"dist": str(dist)})[USER_LIB_ENV] == str(lib)
    assert Fluss.compose_env({"dist": str(lib)})[USER_LIB_ENV] == str(lib)


def test_a_distribution_without_the_jars_or_too_old_is_refused(tmp_path: Path) -> None:
    no_client = jars(tmp_path / "a" / "lib", "fluss-server-0.9.1-incubating.jar").parent
    with pytest.raises(BadArguments, match="holds no fluss-server-.*jar and fluss-client"):
        Fluss.check_options({"dist": str(no_client)})
    with pytest.raises(BadArguments, match="holds no fluss-server"):
        Fluss.check_options({"dist": str(tmp_path / "missing")})
    old = jars(tmp_path / "b", "fluss-server-0.8.0-incubating.jar",
               "fluss-client-0.8.0-incubating.jar")
    with pytest.raises(BadArguments, match=r"\(Fluss 0.8.0-incubating\) is older than"):
        Fluss.check_options({"dist": str(old)})
    with pytest.raises(BadArguments, match="exclude each other"):
        Fluss.check_options({"dist": str(old), "version": "0.9.1-incubating"})


@pytest.mark.parametrize("opt", ["version=0.8.0-incubating", "dist=/nonexistent/fluss"])
def test_the_cli_refuses_in_one_sentence_before_anything_boots(opt: str, tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "leaseline", "run", "--sut", "fluss", "--workload",
         "kv-snapshot-lease", "--time-limit", "5", "--sut-opt", opt,
         "--results-dir", str(tmp_path)],
        cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert opt.split("=", 1)[1] in lines[0]
    assert not any(tmp_path.iterdir())  # no run folder: nothing started
