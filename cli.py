"""The `leaseline` command. Options are declared here; the work happens in harness/ and checkers/.

Every command runs inside `_guard`, which turns a LeaselineError into one sentence on stderr
and its exit code, and anything unexpected into exit 255 (the harness itself crashed).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import click

from leaseline.harness.errors import EXIT_BAD_ARGS, EXIT_CRASH, BadArguments, LeaselineError
from leaseline.harness.run.config import NEMESIS_MODES, RATE_PER_CLIENT, RunConfig
from leaseline.harness.systems.client_models import MODELS as CLIENT_MODELS
from leaseline.harness.systems.client_models import NAMES as CLIENT_MODEL_NAMES
from leaseline.nemesis.registry import catalogue

# `run` and campaign cases share one set of defaults: RunConfig's.
_RUN = RunConfig()


def _guard(fn: Callable[..., int | None]) -> Callable[..., None]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        try:
            code = fn(*args, **kwargs)
        except LeaselineError as e:
            click.echo(f"leaseline: {e}", err=True)
            sys.exit(e.exit_code)
        except KeyboardInterrupt:
            click.echo("leaseline: interrupted.", err=True)
            sys.exit(130)
        except Exception as e:  # noqa: BLE001 - the last line of defence: never a traceback
            import traceback

            from leaseline.harness.store.crashlog import write_crash_log

            where = write_crash_log(traceback.format_exc())
            click.echo(
                f"leaseline: internal error: {e.__class__.__name__}: {e} (details in {where}).",
                err=True,
            )
            sys.exit(EXIT_CRASH)
        sys.exit(code or 0)

    return wrapper


EXIT_CODES = ("Exit codes: 0 valid, 1 invalid, 2 unknown (undecided, or nothing completed), "
              "254 bad arguments or input, 255 the harness failed (no Docker, a node never "
              "ready, …); always one sentence on stderr.")


class _Choice(click.Choice):
    """A closed set named in --help and completed by the shell, whose members are read only
    when needed (`load`), so a registry that imports heavy modules costs nothing to the
    commands that never look. A value outside it is one sentence: `what` 'x' (valid: …)."""

    def __init__(self, load: Callable[[], Any], what: str) -> None:
        self._load, self._loaded, self.what = load, None, what
        self.case_sensitive = True

    @property  # type: ignore[override]
    def choices(self) -> tuple[str, ...]:
        if self._loaded is None:
            self._loaded = tuple(self._load())
        return self._loaded

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None
                ) -> Any:
        if value in self.choices:
            return value
        self.fail(f"unknown {self.what} {value!r} (valid: {', '.join(self.choices)}).",
                  param, ctx)


def _workload_names() -> list[str]:
    from leaseline.workloads.registry import WORKLOADS

    return sorted(WORKLOADS)


def _complete_sut(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
    """--sut completes to the built-in systems and to files (a system file)."""
    from click.shell_completion import CompletionItem

    from leaseline.harness.systems.registry import PROFILES, SYSTEM_FILES

    names = sorted(n for n in [*PROFILES, *SYSTEM_FILES] if n.startswith(incomplete))
    return [*map(CompletionItem, names), CompletionItem(incomplete, type="file")]


class _Group(click.Group):
    """Bad arguments exit 254 (Jepsen's convention) instead of click's 2, which means
    'unknown', and say so in one sentence, as every other refusal does."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().main(*args, standalone_mode=False, **kwargs)
        except click.exceptions.Exit as e:
            sys.exit(e.exit_code)
        except click.ClickException as e:
            message = e.format_message()
            if isinstance(e, click.BadParameter) and isinstance(
                    getattr(e.param, "type", None), _Choice):
                message = message.split(": ", 1)[-1]  # its sentence names the set
            click.echo(f"leaseline: {message}", err=True)
            sys.exit(EXIT_BAD_ARGS)
        except click.exceptions.Abort:
            click.echo("leaseline: aborted.", err=True)
            sys.exit(130)


SPARK_MASTER_HELP = (
    "local[N], spark://HOST:7077 (`leaseline spark up` prints one), or auto: small histories "
    "checked in this process, larger ones on local[*].")


@click.group(cls=_Group, epilog=EXIT_CODES)
@click.version_option(package_name="leaseline", prog_name="leaseline",
                      message="%(prog)s %(version)s")
def main() -> None:
    """Leaseline: lease-window linearizability testing for replicated stores.

    \b
    Shell completion of commands, options, workloads and client models:
      bash, in ~/.bashrc:  eval "$(_LEASELINE_COMPLETE=bash_source leaseline)"
      zsh, in ~/.zshrc:    eval "$(_LEASELINE_COMPLETE=zsh_source leaseline)"
      fish:  _LEASELINE_COMPLETE=fish_source leaseline > ~/.config/fish/completions/leaseline.fish
    """


@main.group()
def images() -> None:
    """Local Docker images (no registry is ever used)."""


@images.command("build")
@click.option("--sut", "system_files", multiple=True, type=click.Path(), help=(
    "Also build the image of the system this TOML file describes (repeatable); a run builds "
    "it anyway, this finds a broken build before any run."))
@click.option("--quiet", is_flag=True, help=(
    "Say nothing when every image is up to date (the setup before each command uses it)."))
@click.option("--campaign", "campaign_files", multiple=True, type=click.Path(), help=(
    "Build only what this campaign's runs boot (the base image, the fault helpers' image and "
    "each case's system), not every shipped image; repeatable. What a CI job wants."))
@_guard
def images_build(system_files: tuple[str, ...], quiet: bool,
                 campaign_files: tuple[str, ...]) -> int:
    """Build the base image and every system-under-test image that changed."""
    from leaseline.harness.clusters.docker.build_view import BuildView

    log = BuildView()
    try:
        return _build_images(system_files, quiet, campaign_files, log)
    finally:
        log.close()


def _build_images(system_files: tuple[str, ...], quiet: bool, campaign_files: tuple[str, ...],
                  log: Callable[[str], None]) -> int:
    from pathlib import Path

    from leaseline.harness.clusters.docker.images import build_all

    if campaign_files:
        from leaseline.harness.clusters.docker.system_cluster import build_images
        from leaseline.harness.run.campaign import campaign_systems

        systems = campaign_systems([Path(c) for c in campaign_files])
        for profile in systems:
            build_images(profile, log)
        log(f"images of {len(systems)} system(s) up to date")
    else:
        built = build_all(log=log)
        for tag in built:
            log(f"built {tag}")
        if built or not quiet:
            log(f"images up to date ({len(built)} rebuilt)")
    if system_files:
        from leaseline.harness.clusters.docker.system_images import system_image
        from leaseline.harness.systems.system_file import load_system

        for path in system_files:
            tag, _ = system_image(load_system(Path(path)), log)
            log(f"{path}: {tag}")
    return 0


@images.command("prune")
@_guard
def images_prune() -> int:
    """Remove this install's images that its build folders no longer make (they changed
    since) and that no container uses; other checkouts' images are left alone."""
    from leaseline.harness.clusters.docker.images import prune

    removed = prune(log=lambda message: click.echo(message, err=True))
    for tag in removed:
        click.echo(f"removed {tag}", err=True)
    click.echo(f"{len(removed)} stale image(s) removed", err=True)
    return 0


@main.command("run", epilog=EXIT_CODES)
@click.option("--sut", default=_RUN.sut, show_default=True, shell_complete=_complete_sut,
              help="System under test: a built-in system's name or a system file NAME.toml.")
@click.option("--workload", default=_RUN.workload, show_default=True,
              type=_Choice(_workload_names, "workload"))
@click.option("--nemesis", default="", help=(
    f"Comma list of faults, each NAME[:TARGET][:d=SECONDS][:KEY=VALUE]: {catalogue()}. "
    "TARGET: leader|one|minority|majority|all (where the fault takes one); d= holds the "
    "fault that long (default: the interval). A system offers only some (a fault it cannot "
    "take is refused before anything starts). E.g. pause-leader:d=2,loss:all:p=0.3"))
@click.option("--nemesis-interval", default=_RUN.nemesis_interval, show_default=True,
              help="Seconds per fault/heal.")
@click.option(
    "--nemesis-mode",
    default=_RUN.nemesis_mode,
    type=_Choice(lambda: NEMESIS_MODES, "nemesis mode"),
    show_default=True,
    help="one (a fault at a time) or overlap (each fault on its own staggered clock).",
)
@click.option("--time-limit", default=_RUN.time_limit, show_default=True,
              help="Seconds of client operations.")
@click.option("--phases", default=None, help=(
    "Consecutive phases, each NAME[:DURATION][:rate=OPS][:reads=P][:nemesis=on|off], e.g. "
    "warmup:10s:rate=50:nemesis=off,faults:40s,quiet:10s:nemesis=off. Durations add up to "
    "--time-limit (one phase may leave its own out and take the rest)."))
@click.option("--rate", type=float, default=_RUN.rate, help=(
    f"Total operations per second (default: {RATE_PER_CLIENT:g} per client)."))
@click.option("--concurrency", default=str(_RUN.concurrency), show_default=True, help=(
    "Client worker threads: a number, or Nn for N per data node (4n: 20 on leasekv)."))
@click.option("--keys", type=int, default=None, help=(
    "Keys in use at any moment (default: the workload's: 1, list-append 12)."))
@click.option("--writes-per-key", type=int, default=None, help="Retire a key after N writes.")
@click.option("--lease-ms", type=float, default=None, help="Lease window (default: the SUT's).")
@click.option("--seed", default=_RUN.seed, show_default=True)
@click.option("--test-name", default=None, help="Results folder name (default: <sut>-<workload>).")
@click.option("--results-dir", default=None, help="Default: ./results.")
@click.option("--leave-running", is_flag=True, help="Do not tear the cluster down at the end.")
@click.option("--spark-master", default=_RUN.spark_master, show_default=True,
              help=SPARK_MASTER_HELP)
@click.option("--sut-opt", multiple=True, help="key=value option of the SUT (repeatable).")
@click.option("--workload-opt", multiple=True, help=(
    "key=value option of the workload (repeatable), e.g. list-append's client=multi|lua|plain|"
    "dynamo, min-txn-length=1, max-txn-length=4, dynamo-txn=auto|transact|single."))
@click.option("--client-routing", default=None,
              type=_Choice(lambda: CLIENT_MODEL_NAMES, "client model"), help=(
    "The client model (default: the system's; redis-sentinel: sentinel, the others: node): "
    + "; ".join(f"{name}: {what}" for name, what in CLIENT_MODELS.items()) + "."))
@click.option("--project", default=None, help="Compose project (default: ll-<sut>).")
@click.option("--hosts", default=None, type=click.Path(), help=(
    "TOML file naming your own machines (name, address, port, user, key_file): run the "
    "system there over SSH instead of in Docker."))
@click.option("--ssh-accept-new-keys", is_flag=True, help=(
    "Trust and record host keys not yet in known_hosts (a changed key is still refused)."))
@click.option("--json", "as_json", is_flag=True, help=(
    'Print only {"run_dir", "valid", "exit_code"} on stdout (everything else goes to stderr).'))
@_guard
def run(as_json: bool, **kwargs: Any) -> int:
    """Boot the cluster, run the workload under faults, record and check the history."""
    from leaseline.harness.run.config import run_config
    from leaseline.harness.run.runner import run as run_test
    from leaseline.harness.run.runner import run_for_scripts

    cfg = run_config(**kwargs)
    return run_for_scripts(cfg) if as_json else run_test(cfg).exit_code


@main.command("inspect", epilog=EXIT_CODES)
@click.argument("run_dir", type=click.Path())
@click.option("--op", "op", type=int, default=None, help="Show this operation's neighbourhood.")
@click.option("--open", "open_", is_flag=True, help="Open report.html in a browser.")
@click.option("--json", "as_json", is_flag=True, help=(
    'Print {"run_dir", "valid", "test", "results", "problems"} (and "op" with --op) as JSON '
    "on stdout instead."))
@_guard
def inspect_cmd(run_dir: str, op: int | None, open_: bool, as_json: bool) -> int:
    """A run's verdict and anomalies, and an operation's neighbourhood, in the terminal."""
    import json
    from pathlib import Path

    from leaseline.checkers.inspect import inspect_json, inspect_run

    if as_json:
        if open_:
            raise BadArguments("--open and --json do not go together: --json prints, --open "
                               "starts a browser.")
        click.echo(json.dumps(inspect_json(Path(run_dir), op=op), default=str))
        return 0
    return inspect_run(Path(run_dir), op=op, open_=open_)


@main.command("campaign", epilog=EXIT_CODES)
@click.argument("campaign_file", type=click.Path())
@click.option("--results-dir", default="results", show_default=True)
@click.option("--spark-master", default=_RUN.spark_master, show_default=True,
              help=SPARK_MASTER_HELP)
@click.option("--json", "as_json", is_flag=True, help=(
    'Print only {"campaign_dir", "name", "exit_code", "cases"} on stdout (the cases as in the '
    "campaign folder's campaign.json; everything else goes to stderr)."))
@_guard
def campaign(campaign_file: str, results_dir: str, spark_master: str, as_json: bool) -> int:
    """Run every case of a campaign file, check all histories in one Spark job, gate on `expect`."""
    from pathlib import Path

    from leaseline.harness.run.campaign import campaign_for_scripts, run_campaign

    if as_json:
        return campaign_for_scripts(Path(campaign_file), Path(results_dir), spark_master)
    return run_campaign(Path(campaign_file), Path(results_dir), spark_master)


# checkers.list_append.models.MODELS, spelled here so --help imports no checker module
# (tests/checkers/test_list_append_cli.py holds the two equal).
CONSISTENCY_MODELS = ("strict-serializable", "serializable", "snapshot-isolation",
                      "repeatable-read", "read-committed", "read-uncommitted",
                      "strong-session-serializable", "strong-session-snapshot-isolation",
                      "strong-snapshot-isolation")


@main.command("check", epilog=EXIT_CODES)
@click.argument("files", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["jsonl", "knossos", "etcd-log", "edn"]),
              default="jsonl", show_default=True,
              help="History format (edn: Jepsen/Elle list-append txns; an .edn file of "
                   "txns is read as such with the default too).")
@click.option("--lease-ms", type=float, default=None,
              help="Lease window (default: the run folder's, for a jsonl history in one; "
                   "else 0 = strict).")
@click.option("--consistency-model", type=click.Choice(CONSISTENCY_MODELS), default=None,
              help="What a txn (list-append) history must satisfy, with Elle's meaning "
                   "[default: strict-serializable].")
@click.option("--json", "as_json", is_flag=True, help="Print the verdicts as JSON on stdout.")
@click.option("--spark-master", default=_RUN.spark_master, show_default=True,
              help=SPARK_MASTER_HELP)
@_guard
def check_cmd(files: tuple[str, ...], fmt: str, lease_ms: float | None,
              consistency_model: str | None, as_json: bool, spark_master: str) -> int:
    """Check recorded histories (one Spark job) and print the verdict; exit 0/1/2."""
    from pathlib import Path

    from leaseline.checkers.spark_session import AUTO, warm_up

    if spark_master != AUTO and files and all(Path(f).is_file() for f in files):
        # the JVM starts while the checker's modules are imported
        warm_up(spark_master, preload="leaseline.checkers.job")

    from leaseline.checkers.check_command import run_check

    return run_check(files, fmt, lease_ms, as_json, spark_master,
                     consistency_model=consistency_model)


# harness.clusters.docker.spark_cluster.DEFAULT_PROJECT, spelled here so --help needs no
# Docker SDK import.
_spark_project = click.option("--project", default="ll-spark", show_default=True,
                              help="Compose project.")


@main.group()
def spark() -> None:
    """A standalone Spark cluster in Docker (one master, two workers) for the checker."""


def _print_spark_state(state: Any) -> None:
    if state.master_url is None:
        click.echo(f"no Spark cluster is running (compose project {state.project})")
        return
    workers = "unknown" if state.workers_alive is None else state.workers_alive
    click.echo(state.master_url)
    click.echo(f"compose project {state.project}; alive workers: {workers}; executors see: "
               f"{', '.join(state.mounts) or 'no host directory'}", err=True)


@spark.command("up")
@_spark_project
@click.option("--mount", multiple=True, type=click.Path(), help=(
    "Another host directory the executors read histories from (the results folder and the "
    "system temp folder always are); repeatable."))
@_guard
def spark_up(project: str, mount: tuple[str, ...]) -> int:
    """Start the cluster (building its image if needed) and print its master URL."""
    from leaseline.harness.clusters.docker import spark_cluster

    _print_spark_state(spark_cluster.up(project, mount))
    return 0


@spark.command("down")
@_spark_project
@_guard
def spark_down(project: str) -> int:
    """Stop and remove the cluster."""
    from leaseline.harness.clusters.docker import spark_cluster

    spark_cluster.down(project)
    return 0


@spark.command("status")
@_spark_project
@_guard
def spark_status(project: str) -> int:
    """Print the master URL (nothing running: exit 1), alive workers and mounted folders."""
    from leaseline.harness.clusters.docker import spark_cluster

    state = spark_cluster.status(project)
    _print_spark_state(state)
    return 0 if state.master_url else 1


@main.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Loopback unless you mean it.")
@click.option("--port", default=8080, show_default=True, type=int)
@click.option("--results-dir", default="results", show_default=True, type=click.Path())
@_guard
def serve_cmd(host: str, port: int, results_dir: str) -> int:
    """Browse every run: verdicts, reports, histories, node logs, zip downloads."""
    from pathlib import Path

    from leaseline.harness.browser.serve import serve

    serve(host, port, Path(results_dir), log=lambda m: click.echo(m, err=True))
    return 0
