"""`leaseline run`: the lifecycle of ARCHITECTURE.md "Data flow".

    cluster up -> wait until really ready -> workers + nemesis write the history
    -> time limit -> heal everything -> wait ready -> final reads -> node logs
    -> tear down (unless --leave-running) -> checker -> results.json, exit code

Whatever happens after the cluster is up (time limit, Ctrl-C, SIGTERM, a crash), the
`finally` below stops the workers, heals every fault, closes the history (so it stays
readable) and tears the cluster down; only a normal end goes on to the checker.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from rich.console import Console

from leaseline.harness.clusters.base import Cluster
from leaseline.harness.clusters.docker.system_cluster import system_cluster
from leaseline.harness.errors import EnvironmentProblem, LeaselineError
from leaseline.harness.run.config import RunConfig
from leaseline.harness.run.leader import LeaderTracker
from leaseline.harness.run.phases import PhaseDriver
from leaseline.harness.run.plan import RunPlan, plan_run
from leaseline.harness.run.progress import live_progress
from leaseline.harness.run.routes import NodeRoute, route_for
from leaseline.harness.run.workers import ProcessIds, Stats, Worker
from leaseline.harness.store.crashlog import write_crash_log
from leaseline.harness.store.history import HistoryWriter, MonotonicClock
from leaseline.harness.store.run_dir import RunDir
from leaseline.harness.systems.profile import Profile
from leaseline.nemesis.base import NemesisContext
from leaseline.nemesis.registry import nemesis_classes
from leaseline.nemesis.schedule import NemesisLog, NemesisSchedule
from leaseline.workloads.base import WorkloadOptions
from leaseline.workloads.registry import workload_class

HEALED_READY_TIMEOUT_S = 60.0


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: heal, keep the history, tear down, exit."""


@dataclass
class RunOutcome:
    run_dir: Path
    exit_code: int
    valid: Any = None
    history_records: int = 0
    faults: int = 0
    report: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)  # go into results.json and the report


@contextmanager
def signals_as_interrupts() -> Iterator[Callable[[], None]]:
    """SIGTERM raises Terminated in the main thread; the yielded function makes both SIGINT
    and SIGTERM wait until cleanup is over (a second Ctrl-C must not leave a fault behind)."""
    if threading.current_thread() is not threading.main_thread():
        yield lambda: None
        return
    pending: list[int] = []

    def on_term(signum: int, _frame: FrameType | None) -> None:
        raise Terminated()

    def defer(signum: int, _frame: FrameType | None) -> None:
        pending.append(signum)

    old_term = signal.signal(signal.SIGTERM, on_term)
    old_int = signal.getsignal(signal.SIGINT)

    def shield() -> None:
        signal.signal(signal.SIGTERM, defer)
        signal.signal(signal.SIGINT, defer)

    try:
        yield shield
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)
        if pending:  # the user asked to stop during cleanup: stop now that it is done
            raise Terminated() if pending[0] == signal.SIGTERM else KeyboardInterrupt()


def wait_ready(profile: Profile, timeout_s: float, console: Console, what: str) -> str | None:
    """None once ready; else the last reason it was not (after timeout_s)."""
    deadline = time.monotonic() + timeout_s
    reason: str | None = "not checked"
    with console.status(f"waiting until the cluster is ready ({what})") as status:
        while time.monotonic() < deadline:
            try:
                reason = profile.readiness()
            except LeaselineError as e:
                reason = str(e)
            if reason is None:
                return None
            status.update(f"waiting until the cluster is ready ({what}): {reason}")
            time.sleep(0.3)
    return reason


def final_reads(
    profile: Profile,
    cfg: RunConfig,
    workload: Any,
    generator: Any,
    tracker: LeaderTracker,
    history: HistoryWriter,
    ids: ProcessIds,
    stats: Stats,
) -> Worker:
    """One read of every key ever used, each by a fresh process, after healing, from the
    leader the harness finds (whatever the client model: a follower may only redirect), and
    then from every other node when the workload reads everywhere (list-append). Returns
    the reader: its `error` is set when a read raised (the reads stop there)."""
    node = tracker.refresh() or profile.nodes[0]
    nodes = [node]
    if workload.final_reads_everywhere:
        nodes += [n for n in profile.nodes if n != node]
    stop = threading.Event()
    reader = Worker(
        -1,
        workload=workload,
        generator=generator,
        route=NodeRoute(profile, workload, node),
        history=history,
        ids=ids,
        stats=stats,
        rate_per_worker=0,
        seed=cfg.seed,
        stop_event=stop,
    )
    try:
        for where in nodes:
            for key in generator.all_keys():
                reader.perform(ids.fresh(), where, generator.final_op(key))
    except Exception as e:  # noqa: BLE001 - said by the runner after the cleanup
        reader.crashed(e)
    finally:
        reader.route.close()
    return reader


def sleep_until(clock: MonotonicClock, t_s: float, abort: threading.Event | None = None) -> bool:
    """False when `abort` was set before t_s."""
    abort = abort or threading.Event()
    # Short naps: Ctrl-C and SIGTERM (raised in this, the main thread) stop the run at once.
    while (left := t_s - clock.now() / 1e9) > 0:
        if abort.wait(min(0.25, left)):
            return False
    return True


def run_clock(clock: MonotonicClock, time_limit: float, phases: PhaseDriver | None,
              abort: threading.Event | None = None) -> bool:
    """The run's clock, owned here: enters each phase at its start (the first is entered
    before the workers start) and returns at the time limit: True; or as soon as `abort`
    is set (a worker died): False."""
    if phases is not None:
        for index, start_s in enumerate(phases.starts_s[1:], 1):
            if not sleep_until(clock, start_s, abort):
                return False
            phases.enter(index)
    return sleep_until(clock, time_limit, abort)


def collect_logs(cluster: Cluster, profile: Profile, run_dir: RunDir) -> None:
    for service in profile.services():
        out = run_dir.node_dir(service)
        for name, data in cluster.node_logs(service, profile.log_files(service)).items():
            (out / name).write_bytes(data)


def run(cfg: RunConfig, console: Console | None = None) -> RunOutcome:
    console = console or Console(stderr=True)
    plan = plan_run(cfg)
    if plan.routing_warning is not None:
        console.print(f"[yellow]warning: {plan.routing_warning}[/]")
    run_dir = RunDir.create(Path(cfg.results_dir), plan.test_name)
    plan.write_test(run_dir)
    print_path(console, "run folder", run_dir.path)
    try:
        return _lifecycle(plan, run_dir, console)
    except BaseException:
        # CI still gets a junit.xml saying the run produced no verdict.
        with contextlib.suppress(Exception):
            from leaseline.checkers.junit import write_junit

            write_junit(run_dir.path)
        raise


def print_path(console: Console, label: str, path: Path) -> None:
    """`label path` on ONE line whatever the terminal width, so it can be copied or cut
    out of a log: no wrapping, no markup or highlighting inside the path."""
    console.print(f"{label} {path}", soft_wrap=True, markup=False, highlight=False)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """For a command whose stdout is one JSON object: everything said meanwhile goes to
    stderr, child processes' output too (fd 1 points at fd 2)."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run_for_scripts(cfg: RunConfig) -> int:
    """`run --json`: everything the run says goes to stderr, then ONE JSON object on stdout:
    run_dir, valid, exit_code."""
    with stdout_to_stderr():
        outcome = run(cfg)
    doc = {"run_dir": str(outcome.run_dir), "valid": outcome.valid, "exit_code": outcome.exit_code}
    sys.stdout.write(json.dumps(doc) + "\n")
    sys.stdout.flush()
    return outcome.exit_code


def _lifecycle(plan: RunPlan, run_dir: RunDir, console: Console) -> RunOutcome:
    if plan.cfg.check:  # the JVM starts while the cluster boots and the workload runs
        from leaseline.checkers.job import warm_up_for

        warm_up_for(plan.cfg.spark_master, plan.rate * plan.cfg.time_limit)
    life = Lifecycle(plan, run_dir, console)
    with signals_as_interrupts() as shield:
        try:
            life.boot()
            life.ready()
            life.drive()
        finally:
            shield()  # from here on Ctrl-C / SIGTERM wait until the cluster is healed
            life.teardown()
    return life.record()


class Lifecycle:
    """One run's live parts, and the steps of ARCHITECTURE.md "Data flow" that share them,
    in order: boot (the cluster up), ready (really ready, the workload set up), drive
    (workers and nemeses until the time limit), teardown (always: heal, final reads, logs,
    cluster down) and record (the outcome, checked). Each step owns the state it makes."""

    def __init__(self, plan: RunPlan, run_dir: RunDir, console: Console) -> None:
        self.plan, self.cfg, self.run_dir, self.console = plan, plan.cfg, run_dir, console
        self.cluster = self._machines()
        self.profile = plan.profile(self.cluster, self.cfg.sut_opts)
        self.workload = workload_class(self.cfg.workload)(
            WorkloadOptions(keys=plan.keys, writes_per_key=self.cfg.writes_per_key,
                            seed=self.cfg.seed, extra=dict(plan.workload_opts),
                            redis_protocol=self.profile.redis_protocol)
        )
        self.generator = self.workload.new_generator()
        self.clock = MonotonicClock()
        self.history = HistoryWriter(run_dir.history, self.clock)
        self.nem_log = NemesisLog(run_dir.nemesis_log)
        self.stats, self.ids = Stats(), ProcessIds(plan.clients)
        self.tracker = LeaderTracker(self.profile)
        self.stop_workers = threading.Event()
        self.worker_died = threading.Event()
        self.workers: list[Worker] = []
        self.final_reader: Worker | None = None
        self.schedule: NemesisSchedule | None = None
        self.phases: PhaseDriver | None = None
        self.completed = False
        self.cleanup_problems: list[str] = []
        self.history_error: OSError | None = None
        self.warnings: list[str] = []

    def _machines(self) -> Cluster:
        def log(message: str) -> None:
            self.console.print(f"[dim]{message}[/]")

        if self.plan.remote:  # the user's own machines: no image, no container, no Docker
            from leaseline.harness.clusters.ssh.remote import remote_cluster

            return remote_cluster(self.plan.profile, self.cfg.hosts, self.cfg.sut_opts,
                                  self.cfg.ssh_accept_new_keys, log)
        return system_cluster(self.plan.profile, self.cfg.sut_opts, self.plan.project,
                              self.run_dir.compose_file, log)

    def boot(self) -> None:
        """The cluster started from a clean state."""
        cfg = self.cfg
        if self.plan.remote:
            self.console.print(f"starting {cfg.sut} on {len(self.profile.nodes)} machines over "
                               f"SSH ({cfg.hosts})")
        else:
            self.console.print(f"starting the {cfg.sut} cluster (compose project "
                               f"{self.plan.project})")
        self.cluster.down()  # a previous run's leftovers (faults included) go with it
        self.cluster.up()

    def ready(self) -> None:
        """Waits until the system says it is ready, then sets the workload up on its leader."""
        bound = self.profile.ready_timeout_s
        why = wait_ready(self.profile, bound, self.console, "start")
        if why is not None:
            raise EnvironmentProblem(
                f"the {self.cfg.sut} cluster never became ready within {bound:.0f} s "
                f"({why}); its logs are in {self.run_dir.nodes}."
            )
        self.tracker.refresh()
        self.tracker.start()
        self.workload.setup(self.profile, self.tracker.current or self.profile.nodes[0])

    def drive(self) -> None:
        """The nemeses and the workers, from time 0 to the time limit (or a dead worker)."""
        cfg, plan = self.cfg, self.plan
        ctx = NemesisContext(self.profile, self.cluster, self.nem_log, seed=cfg.seed)
        nemeses = [cls(ctx) for cls in nemesis_classes(cfg.nemesis, plan.profile,
                                                          type(self.cluster))]
        self.schedule = NemesisSchedule(nemeses, self.history, cfg.nemesis_interval,
                                        self.nem_log, cfg.seed, mode=cfg.nemesis_mode)
        # Time 0 is the moment the workload starts (cluster boot is not part of the test).
        self.clock = self.history.clock = MonotonicClock()
        if plan.phases:
            self.phases = PhaseDriver(list(plan.phases), self.schedule, self.generator,
                                      plan.rate, plan.clients)
            self.phases.enter(0)  # at time 0, before any operation or fault
        for wid in range(plan.clients):
            w = Worker(
                wid,
                workload=self.workload,
                generator=self.generator,
                route=route_for(plan.routing, wid, self.profile, self.workload, self.tracker),
                history=self.history,
                ids=self.ids,
                stats=self.stats,
                rate_per_worker=(
                    self.phases.rate_per_worker if self.phases else plan.rate / plan.clients
                ),
                seed=cfg.seed,
                stop_event=self.stop_workers,
                died=self.worker_died,
            )
            self.workers.append(w)
            w.start()
        self.schedule.start()
        with live_progress(self.console, cfg.time_limit, self.clock, self.stats, self.schedule,
                           self.tracker, self.phases):
            # A dead worker ends the run now: it exits 255 once the cluster is healed.
            self.completed = run_clock(self.clock, cfg.time_limit, self.phases,
                                       self.worker_died)

    def teardown(self) -> None:
        """Whatever happened: workers stopped, every fault healed, the final reads (after a
        run that reached its time limit), the history closed, logs kept, the cluster down."""
        self.stop_workers.set()
        for w in self.workers:
            w.join(10)
        if self.schedule is not None:
            self.schedule.stop()
            self.cleanup_problems += self.schedule.heal_all()
        if self.completed:
            self._final_reads()
        self.tracker.stop()
        try:
            self.history.close()
        except OSError as e:  # disk full, ...: said by record, after the cleanup still due
            self.history_error = e
        self.nem_log.close()
        self.run_dir.render_history_txt()
        with contextlib.suppress(LeaselineError):  # no engine/containers: nothing to collect
            collect_logs(self.cluster, self.profile, self.run_dir)
        self._release()

    def _final_reads(self) -> None:
        why = wait_ready(self.profile, HEALED_READY_TIMEOUT_S, self.console, "after healing")
        if why is not None:
            self.warnings.append(f"the cluster was not ready {HEALED_READY_TIMEOUT_S:.0f} s "
                                 f"after healing ({why}); the final reads ran anyway.")
            self.nem_log(f"cluster not ready after healing: {why}")
            self.console.print(f"[yellow]warning: {self.warnings[-1]}[/]")
        self.final_reader = final_reads(self.profile, self.cfg, self.workload, self.generator,
                                        self.tracker, self.history, self.ids, self.stats)

    def _release(self) -> None:
        """The cluster down, or (--leave-running) left running with no fault on it."""
        if not self.cfg.leave_running:
            try:
                self.cluster.down()
            except LeaselineError as e:
                self.cleanup_problems.append(str(e))
        else:
            try:  # the servers go on, but no fault may outlive the run
                self.cluster.heal_everything()
            except LeaselineError as e:
                self.cleanup_problems.append(str(e))
            self.console.print(
                f"cluster left running on the machines of {self.cfg.hosts}" if self.plan.remote
                else f"cluster left running: compose project {self.plan.project}")
        self.cluster.close()

    def record(self) -> RunOutcome:
        """The outcome of a run that ended without an exception: one sentence for a history
        not written, a dead worker or a fault not healed; else checked (--check)."""
        dead = [w for w in (*self.workers, self.final_reader)
                if w is not None and w.error is not None]
        history_error = self.history_error or next(
            (w.error for w in dead if isinstance(w.error, OSError)), None)
        if history_error is not None:
            raise EnvironmentProblem(
                f"the history could not be written ({history_error.strerror or history_error}); "
                f"what was written before that is in {self.run_dir.history}."
            )
        if dead:
            raise worker_died_problem(dead[0], self.run_dir)
        if self.cleanup_problems:
            raise EnvironmentProblem(f"healing the faults failed: {self.cleanup_problems[0]}")
        outcome = RunOutcome(self.run_dir.path, 0, history_records=self.history.count,
                             faults=self.schedule.faults if self.schedule else 0,
                             warnings=self.warnings)
        if self.cfg.check:
            check(outcome, self.cfg.spark_master, self.console)
        return outcome


def worker_died_problem(worker: Worker, run_dir: RunDir) -> EnvironmentProblem:
    """One sentence for a worker that died from an exception (a client must classify every
    reply, so this is the harness's fault): which worker, which exception, where its
    traceback and the history are."""
    e = worker.error
    text = " ".join(str(e).split())  # one line whatever the exception says
    what = f"{type(e).__name__}: {text}" if text else type(e).__name__
    where = write_crash_log(f"{worker.describe()} died:\n{worker.trace}")
    return EnvironmentProblem(
        f"{worker.describe()} died from {what} (traceback in {where}); the run stopped "
        f"and the history up to then is in {run_dir.history}."
    )


def check(outcome: RunOutcome, spark_master: str, console: Console) -> None:
    """The checker entry point shared with `check` and `campaign`; the lease is the run's."""
    from leaseline.checkers.check_command import check_runs
    from leaseline.checkers.summary import exit_code, print_summary

    run = RunDir(outcome.run_dir)
    file_report = check_runs([run], spark_master, console, {run.path: outcome.warnings})[run.path]
    print_summary(file_report, console)
    outcome.valid = file_report["valid"]
    outcome.report = file_report
    outcome.exit_code = exit_code(file_report["valid"])
