"""The real Redis clients against a real server that refuses RESP3, SCRIPT and EVALSHA (as
elastickv does): RESP2 by fallback or by the system's choice, every refusal a classified
fail with the server's words, and never an exception, neither in a client nor in a worker."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from resp2_server import Resp2Server

from leaseline.harness.run.routes import NodeRoute
from leaseline.harness.run.workers import ProcessIds, Stats, Worker
from leaseline.harness.systems.profile import Endpoint
from leaseline.workloads.base import FAIL, OK, Completion, Op, WorkloadOptions
from leaseline.workloads.lua_cas import LuaCas
from leaseline.workloads.register import Register


@pytest.fixture(params=["noproto", "unknown"])
def server(request: pytest.FixtureRequest) -> Iterator[Resp2Server]:
    """A server answering HELLO 3 with NOPROTO, or not knowing HELLO at all."""
    with Resp2Server(hello=request.param) as s:
        yield s


def opened(workload: Any, s: Resp2Server, node: str = "n1") -> Any:
    c = workload.new_client()
    c.open(node, Endpoint("127.0.0.1", s.port))
    return c


def test_register_falls_back_to_resp2_and_remembers_it(server: Resp2Server) -> None:
    wl = Register(WorkloadOptions())
    c = opened(wl, server)
    assert c.invoke(Op("write", "r0", 1)) == Completion(OK, 1)
    read = c.invoke(Op("read", "r0"))
    assert (read.type, read.value, c.protocol) == (OK, 1, 2)
    assert c.invoke(Op("read", "r1")).value is None  # absent
    assert server.commands.count("HELLO") == 1  # refused once; RESP2 from then on
    # Every client of the workload knows it now: no HELLO for a fresh one either.
    again = opened(wl, server)
    assert again.invoke(Op("read", "r0")).value == 1
    assert server.commands.count("HELLO") == 1
    c.close()
    again.close()


def test_the_system_can_choose_resp2() -> None:
    with Resp2Server(hello="noproto") as s:
        c = opened(Register(WorkloadOptions(redis_protocol=2)), s)
        assert c.invoke(Op("write", "r0", 7)).type == OK
        assert c.invoke(Op("read", "r0")).value == 7
        assert "HELLO" not in s.commands
        c.close()


def test_a_system_that_insists_on_resp3_gets_a_fail_not_an_exception() -> None:
    with Resp2Server(hello="noproto") as s:
        c = opened(Register(WorkloadOptions(redis_protocol=3)), s)
        for op in (Op("write", "r0", 1), Op("read", "r0")):
            done = c.invoke(op)
            assert done.type == FAIL
            assert done.error == "connect: NOPROTO unsupported protocol version"
        assert s.commands == ["HELLO", "HELLO"]  # nothing of the operations was sent


def test_an_unexpected_handshake_reply_is_a_fail() -> None:
    with Resp2Server(hello="garbage") as s:
        c = opened(Register(WorkloadOptions()), s)
        done = c.invoke(Op("write", "r0", 1))
        assert (done.type, done.value) == (FAIL, 1)
        assert (done.error or "").startswith("connect: unexpected reply while connecting")
        assert "SET" not in s.commands


def test_lua_cas_without_script_and_with_a_refusing_evalsha(server: Resp2Server) -> None:
    wl = LuaCas(WorkloadOptions())
    # Before setup the client tries EVALSHA, which this node refuses: a fail in its words.
    c = opened(wl, server)
    for op in (Op("cas", "c0", [None, 1]), Op("read", "c0")):
        done = c.invoke(op)
        assert (done.type, done.error) == (FAIL, "NOTLEADER leader is n2")
    assert server.commands.count("EVALSHA") == 2 and "EVAL" not in server.commands
    # Setup finds no SCRIPT command: every client of the workload uses EVAL there.
    profile = SimpleNamespace(nodes=("n1",),
                              endpoint=lambda _node, _proto: Endpoint("127.0.0.1", server.port))
    wl.setup(profile, "n1")  # type: ignore[arg-type]
    assert wl.eval_only == {"n1"}
    c = opened(wl, server)
    assert c.invoke(Op("cas", "c0", [None, 1])).type == OK
    mismatch = c.invoke(Op("cas", "c0", [5, 2]))
    assert mismatch.type == FAIL and "compare failed" in (mismatch.error or "")
    assert c.invoke(Op("cas", "c0", [1, 2])).type == OK
    read = c.invoke(Op("read", "c0"))
    assert (read.type, read.value) == (OK, 2)
    assert c.invoke(Op("write", "c0", 3)).type == OK
    assert server.commands.count("EVALSHA") == 2  # none since setup
    assert server.data[b"c0"] == b"3"
    c.close()


class _History:
    def __init__(self) -> None:
        self.records: list[tuple[str, str, Any]] = []
        self._lock = threading.Lock()

    def record(self, process: Any, type_: str, f: str, key: Any = None, value: Any = None,
               node: Any = None, error: Any = None) -> None:
        with self._lock:
            self.records.append((type_, f, error))


@pytest.mark.parametrize("hello", ["noproto", "unknown", "garbage"])
@pytest.mark.parametrize("workload", [Register, LuaCas])
def test_workers_survive_the_server(hello: str, workload: type[Any]) -> None:
    """Real worker threads with the real clients: every operation completes, none dies."""
    with Resp2Server(hello=hello) as s:
        profile = SimpleNamespace(nodes=("n1", "n2"),
                                  endpoint=lambda _node, _proto: Endpoint("127.0.0.1", s.port))
        wl = workload(WorkloadOptions(keys=2))
        generator, history, stats = wl.new_generator(), _History(), Stats()
        stop = threading.Event()
        workers = [Worker(wid, workload=wl, generator=generator,
                          route=NodeRoute(profile, wl, profile.nodes[wid % 2]),  # type: ignore[arg-type]
                          history=history, ids=ProcessIds(4),  # type: ignore[arg-type]
                          stats=stats, rate_per_worker=200, seed=1, stop_event=stop)
                   for wid in range(4)]
        for w in workers:
            w.start()
        while sum(stats.snapshot().values()) < 200:
            stop.wait(0.01)
        stop.set()
        for w in workers:
            w.join(5)
            assert w.error is None and not w.is_alive()
        completions = [r for r in history.records if r[0] != "invoke"]
        assert len(completions) == len(history.records) // 2
        if hello == "garbage":  # nothing gets through a handshake that went wrong
            assert {r[0] for r in completions} == {FAIL}
        else:
            assert OK in {r[0] for r in completions}
