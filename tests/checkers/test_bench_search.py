"""bench_search's own corpora (--corpus): a folder of Knossos EDN files and Jepsen etcd
logs imported as `leaseline check` imports them, and its bad arguments."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from repo_paths import CORPORA
from test_corpora import ETCD

from bench.bench_search import corpus_cases, history_of, main
from leaseline.checkers.decide import LINEARIZABLE, VIOLATION, check_key

BAD = CORPORA / "knossos" / "cas-register" / "bad"


@pytest.mark.skipif(not BAD.is_dir(), reason=f"no corpora at {CORPORA}")
def test_a_corpus_folder_holds_edn_files_and_etcd_logs(tmp_path: Path) -> None:
    shutil.copy(BAD / "immediate-failure.edn", tmp_path)
    (tmp_path / "etcd_000.log").write_text(ETCD)
    (tmp_path / "notes.txt").write_text("not a history")
    cases = corpus_cases(tmp_path, "held-out")
    assert [c["name"] for c in cases] == ["held-out/etcd_000", "held-out/immediate-failure"]
    verdicts = [check_key(history_of(c), 0).status for c in cases]
    assert verdicts == [LINEARIZABLE, VIOLATION]


def test_bad_arguments_are_one_sentence(tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--corpus-only"]) == 254
    assert main(["--corpus", str(tmp_path / "missing")]) == 254
    (tmp_path / "x.log").write_text("garbage\n")
    assert main(["--corpus", str(tmp_path), "--corpus-only"]) == 254
    err = capsys.readouterr().err.splitlines()
    assert err == ["bench_search: --corpus-only needs at least one --corpus DIR",
                   f"bench_search: --corpus {tmp_path / 'missing'}: not a folder",
                   f"bench_search: {tmp_path / 'x.log'}:1: not a Jepsen log line "
                   "'INFO  jepsen.util - <process> :<type> :<f> <value>'"]
    (tmp_path / "x.log").unlink()
    assert main(["--corpus", str(tmp_path), "--corpus-only"]) == 254
    assert capsys.readouterr().err.strip().endswith("no Knossos .edn file or etcd .log "
                                                    "in this folder")
