"""Reference histories with known verdicts (read from ../shared/corpora at run time) and
the two Jepsen importers."""

from __future__ import annotations

from pathlib import Path

import pytest
from repo_paths import CORPORA

from leaseline.checkers.decide import LINEARIZABLE, VIOLATION, check_key
from leaseline.checkers.errors import HistoryFormatError
from leaseline.checkers.importers.etcd_log import read_etcd_log
from leaseline.checkers.importers.knossos import read_knossos
from leaseline.checkers.ops import CAS, CAS_FAILED, READ, UNKNOWN_END, WRITE

CAS_DIR = CORPORA / "knossos" / "cas-register"
GOOD = sorted((CAS_DIR / "good").glob("*.edn"))
BAD = sorted((CAS_DIR / "bad").glob("*.edn"))
needs_corpora = pytest.mark.skipif(not CAS_DIR.is_dir(), reason=f"no corpora at {CORPORA}")


@needs_corpora
def test_corpus_is_complete() -> None:
    assert (len(GOOD), len(BAD)) == (113, 7)


@needs_corpora
@pytest.mark.parametrize("path", GOOD, ids=lambda p: p.name)
def test_good_histories_are_linearizable(path: Path) -> None:
    res = check_key(read_knossos(path), 0)
    assert res.status == LINEARIZABLE, res.reason
    assert res.method == "wgl"


@needs_corpora
@pytest.mark.parametrize("path", BAD, ids=lambda p: p.name)
def test_bad_histories_are_violations(path: Path) -> None:
    res = check_key(read_knossos(path), 0)
    assert res.status == VIOLATION, res.reason
    assert res.counterexample is not None and res.counterexample["ops"]


@needs_corpora
def test_bad_analysis_counterexample_is_process_21s_read_of_2() -> None:
    res = check_key(read_knossos(CAS_DIR / "bad" / "bad-analysis.edn"), 0)
    ops = res.counterexample["ops"]  # type: ignore[index]
    assert any(o["process"] == 21 and o["f"] == "read" and o["value"] == 2 for o in ops)
    # the read, the write of 2 it needed, a write that overwrote it
    assert {(o["f"], o["value"]) for o in ops} >= {("read", 2), ("write", 2)}
    assert len(ops) <= 3


@needs_corpora
def test_cas_failure_counterexample_is_process_70s_read_after_76s_write() -> None:
    res = check_key(read_knossos(CAS_DIR / "bad" / "cas-failure.edn"), 0)
    ops = res.counterexample["ops"]  # type: ignore[index]
    assert any(o["process"] == 70 and o["f"] == "read" and o["value"] == 0 for o in ops)
    assert any(o["process"] == 76 and o["f"] == "write" and o["value"] == 2 for o in ops)


@needs_corpora
def test_knossos_conventions() -> None:
    h = read_knossos(CAS_DIR / "good" / "memstress3-0.edn")
    assert h.model == "cas-register" and h.initial == "0"
    ops = h.operations()
    assert all(o.value is not None for o in ops if o.f == READ)  # nil reads dropped
    assert {o.f for o in ops} <= {READ, WRITE, CAS}  # failed cas dropped
    timed = read_knossos(CAS_DIR / "bad" / "rethink-fail.edn")
    assert timed.invoke.max() > 10**9  # :time (ns) used when present
    assert any(e.f == "start" for e in timed.nemesis) or timed.nemesis == []


def test_knossos_malformed(tmp_path: Path) -> None:
    bad = tmp_path / "h.edn"
    bad.write_text("[{:process 1, :type :invoke, :f :read, :value nil}\n {:process 1 :type")
    with pytest.raises(HistoryFormatError, match="h.edn:2"):
        read_knossos(bad)
    bad.write_text("[{:process 1, :type :ok, :f :read, :value 1}]")
    with pytest.raises(HistoryFormatError, match="never invoked"):
        read_knossos(bad)
    bad.write_text('[{:process 1, :type :invoke, :f :txn, :value [[:r :x nil]]}\n'
                   ' {:process 1, :type :ok, :f :txn, :value [[:r :x 1]]}]')
    with pytest.raises(HistoryFormatError, match="not a register operation"):
        read_knossos(bad)


ETCD = """\
INFO  jepsen.util - 4\t:invoke\t:read\tnil
INFO  jepsen.util - 4\t:ok\t:read\tnil
INFO  jepsen.util - 1\t:invoke\t:write\t1
INFO  jepsen.util - 0\t:invoke\t:cas\t[1 4]
INFO  jepsen.util - 1\t:ok\t:write\t1
INFO  jepsen.util - 0\t:fail\t:cas\t[1 4]
INFO  jepsen.util - 2\t:invoke\t:cas\t[1 3]
INFO  jepsen.util - 2\t:info\t:cas\t:timed-out
INFO  jepsen.util - 3   :invoke   :read   nil
INFO  jepsen.util - 3   :fail   :read   :timed-out
INFO  jepsen.util - 5\t:invoke\t:read\tnil
INFO  jepsen.util - 5\t:ok\t:read\t3
"""


def test_etcd_log_reader(tmp_path: Path) -> None:
    p = tmp_path / "etcd_000.log"
    p.write_text(ETCD)
    h = read_etcd_log(p)
    assert (h.model, h.initial, h.key) == ("cas-register", None, "etcd_000")
    ops = h.operations()
    assert [(o.f, o.value, o.expected) for o in ops] == [
        (READ, None, None), (WRITE, "1", None), (CAS_FAILED, None, "1"), (CAS, "3", "1"),
        (READ, "3", None),
    ]
    assert ops[3].complete == UNKNOWN_END  # :info = unknown
    assert [o.invoke for o in ops] == [1, 3, 4, 7, 11]  # line numbers as logical time
    assert check_key(h, 0).status == LINEARIZABLE


def test_etcd_log_violation(tmp_path: Path) -> None:
    p = tmp_path / "e.log"
    p.write_text(ETCD + "INFO  jepsen.util - 6\t:invoke\t:read\tnil\n"
                 "INFO  jepsen.util - 6\t:ok\t:read\t1\n")
    res = check_key(read_etcd_log(p), 0)
    # the read of 1 (line 13) must move back to the read of 3 completing (line 12)
    assert res.status == VIOLATION and res.min_delta_ns == 13 - 12


def test_etcd_log_malformed_line(tmp_path: Path) -> None:
    p = tmp_path / "e.log"
    p.write_text(ETCD + "WARN something else entirely\n")
    with pytest.raises(HistoryFormatError) as e:
        read_etcd_log(p)
    assert e.value.line == 13 and "not a Jepsen log line" in str(e.value)
    p.write_text("INFO  jepsen.util - 1\t:invoke\t:write\t[1\n")
    with pytest.raises(HistoryFormatError, match=r"e.log:1: bad value"):
        read_etcd_log(p)
