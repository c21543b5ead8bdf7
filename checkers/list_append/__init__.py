"""The list-append checker: Elle's inference over transactions of appends and whole-list
reads, with the read lease.

Derivation. Clients append values unique per key and read whole lists. A database that
keeps appends atomic gives every key one version order (the order the appends took
effect), and every read returns a prefix of it; so the longest read *is* the order, as
far as it reaches (Kingsbury & Alvaro, "Elle: Inferring Isolation Anomalies from
Experimental Observations", VLDB 2020, section 4). Knowing each key's version order, the
direct serialization graph of Adya's thesis ("Weak Consistency", 1999) follows without
guessing: T1 -ww-> T2 when T2 appended the element after T1's, T1 -wr-> T2 when T2 read
a state whose last element T1 appended, T1 -rw-> T2 when T1 read the state T2's append
ended (checkers/list_append/per_key.py). A history is serializable when the graph with
its version orders is acyclic (Adya); strict serializability adds real-time edges (T1
completed before T2 began), strong session models process edges. A cycle is named by its
edges (checkers/list_append/graph.py): only ww is G0; ww and wr G1c; one rw
G-single-item; several rw, never two in a row, G-nonadjacent-item; otherwise G2-item;
with -process or -realtime when such an edge closes it. What one key alone shows is
found on the way: duplicates, orders two reads contradict, reads of aborted or
intermediate state (G1a, G1b), a committed append on aborted state (dirty-update),
contradictions inside one txn (internal, future-read), two txns that read one state
and both append (lost-update), and acknowledged appends that reads skip although they
show later ones, or that reads showed and every read begun after them lacks (lost-write).
A consistency model prohibits a set of these (checkers/list_append/models.py, Elle's
relations); the history is invalid when a prohibited one is found, unknown when a
search ran out of budget or the graph is empty, valid otherwise, and `not` names the
weakest models the found anomalies rule out.

Info transactions count both ways: their appends are in the order when a read shows
them, their reads are unknown, and they receive real-time edges but never give any (they
never completed), so an info txn that did not happen closes no cycle, and one that did
is placed by what was read.

The lease. A read-only transaction served from a leader lease L may see the state of up
to L before its invocation. So the real-time edges into a read-only txn from txns that
completed less than L before it began are not prohibitions: the real-time graph is built
with read-only txns invoked L earlier, exactly the read shift of the register checker's
Delta-atomicity (checkers/decide.py), and nothing else changes. A read-only txn's
staleness is how long before its invocation the state it read had been superseded: the
earliest completion of an ok txn that appended an element beyond that state. The
verdict, for the model's real-time anomalies: valid (nothing prohibited, no stale read),
lease-bounded (prohibited cycles all vanish at L and every staleness is <= L), violation
(something prohibited remains at L, or a staleness exceeds a lease L > 0), unknown (a
cycle search ran out of budget, or nothing could be related). At L = 0 the real-time
order is the history's record order, as Elle's; the lease's is by time.

Stages. `key_stage` (per_key.py) is a pure function of one key's micro-ops and the txn
table, to map over keys on Spark; `graph_stage` (check.py) runs on the driver;
`check_history` runs both. The result is the dict of ARCHITECTURE.md, "The list-append
checker". Where the optional extension checkers/la_compiled.pyx is built, the jsonl
reader, the per-key stage of every key that shows no anomaly (columns.py), the real-time
sweep, the edges' merge and the SCCs run compiled; a key that may show one still goes
through key_stage, and without the extension everything runs as above in Python, to the
same columns and verdicts.
"""

from leaseline.checkers.list_append.check import (
    DEFAULT_MODEL,
    check_history,
    check_txns,
    graph_stage,
    key_results,
)
from leaseline.checkers.list_append.history import (
    TxnHistoryError,
    Txns,
    read_history,
    txns_from_records,
)
from leaseline.checkers.list_append.per_key import (
    KeyOps,
    KeyResult,
    TxnInfo,
    key_stage,
    split_by_key,
)

__all__ = ["DEFAULT_MODEL", "KeyOps", "KeyResult", "TxnHistoryError", "TxnInfo", "Txns",
           "check_history", "check_txns", "graph_stage", "key_results",
           "key_stage", "read_history", "split_by_key", "txns_from_records"]
