"""The ``nevis`` command: one Typer app with a sub-app per area.

Any :class:`~services.core.errors.NevisError` becomes one red line on stderr and exit code 2;
a traceback means a bug.
"""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from services.cli import (
    admin_cmd,
    check_cmd,
    config_cmd,
    data_cmd,
    db_cmd,
    doctor_cmd,
    init_cmd,
    pretrain_cmd,
    probe_cmd,
    refresh_cmd,
    remote_cmd,
    run_cmd,
    sandbox_cmd,
    serve_cmd,
    store_cmd,
    streams_cmd,
    study_cmd,
    uncertainty_cmd,
    verify_cmd,
)
from services.core.errors import NevisError

app = typer.Typer(
    name="nevis",
    help="Evaluate never-ending learners on the NEVIS'22 protocol.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("config", help="Print the effective settings (secrets masked).")(config_cmd.show_config)
app.command(
    "doctor",
    help="What this machine gives the service (sandbox, cgroups, database, GPUs...) and how to fix what is missing.",
)(doctor_cmd.doctor)
app.add_typer(db_cmd.app, name="db", help="Database schema management.")
app.add_typer(streams_cmd.app, name="streams", help="List and inspect stream manifests.")
app.add_typer(
    data_cmd.app,
    name="data",
    help="Fetch the sources of a stream (`nevis data fetch`) and turn datasets into checksummed shards.",
)
app.add_typer(
    store_cmd.app, name="store", help="Object-store maintenance: `nevis store gc` removes unreferenced objects."
)
app.command("run", help="Run a learner over a stream on Ray; prints E and cFLOP.")(run_cmd.run)
app.command("results", help="Print a stored run: per-task errors, E with its 95 % interval, and cFLOP.")(
    run_cmd.results
)
app.command(
    "verify",
    help="Replay a finished public run with new seeds (--seeds N); it is marked verified when every replay's E "
    "falls inside its 95 % interval, not reproduced otherwise (docs/rules.md).",
)(verify_cmd.verify)
app.command(
    "compare",
    help="Compare two runs (or A1,A2 B1,B2: seeds) on one stream version: per-task Δ and flags, ΔE's 95 % interval, Δ cFLOP.",
)(uncertainty_cmd.compare)
app.add_typer(
    pretrain_cmd.app,
    name="pretrain",
    help="Pretrained checkpoints: self-pretrained on a stream's meta-train tasks (pt_self, pt_ft_self), "
    "or `nevis pretrain import` of weights pretrained elsewhere (pt, pt_ft).",
)
app.add_typer(
    study_cmd.app, name="study", help="Studies of many runs: `nevis study pareto` (E against cFLOP over budgets)."
)
app.add_typer(probe_cmd.app, name="probe", help="Probe saved checkpoints (mismatch curves, LiDAR, RankMe).")
probe_cmd.app.command("run", help="Probe a run's committed tasks and print the report.")(probe_cmd.run)
app.command("probe-workers", help="Run a pool of probe workers on the queue.")(probe_cmd.workers_command)
app.command("serve", help="Start the coordinator API and scheduler.")(serve_cmd.serve)
app.command("openapi", help="Write (or --check) api_schema/openapi.json.")(serve_cmd.openapi)
app.add_typer(admin_cmd.users_app, name="users", help="Create and list API users.")
app.add_typer(admin_cmd.tokens_app, name="tokens", help="Create, list and revoke API tokens.")
app.add_typer(sandbox_cmd.app, name="sandbox", help="What learner pods need on the nodes (the seccomp profile).")
app.add_typer(serve_cmd.worker_app, name="worker", help="Worker harness commands (run by backends).")
app.add_typer(
    refresh_cmd.app,
    name="refresh",
    help="Benchmark refreshes: re-run baselines and pinned submissions on new stream versions.",
)
# A remote service (issue 25): `nevis login` once, then these talk to it; `run` / `results` stay local.
app.command("login", help="Keep a remote service's URL and API token (token from a prompt or stdin).")(remote_cmd.login)
app.command("submit", help="Check, pack and upload a learner folder, submit it to the service, follow the run.")(
    remote_cmd.submit
)
app.command("status", help="A remote submission's status and results (or your recent submissions).")(remote_cmd.status)
app.command("cancel", help="Cancel a queued or running remote submission.")(remote_cmd.cancel)
app.command("logs", help="A remote submission's logs: learner output and tracebacks, per trial (yours only).")(
    remote_cmd.logs
)
app.command("leaderboard", help="The service's leaderboard of a stream (E, cFLOP).")(remote_cmd.leaderboard)
app.command("check", help="Run a learner's protocol calls on a tiny built-in stream; exit 1 on the first broken one.")(
    check_cmd.check
)
app.add_typer(init_cmd.app, name="init", help="Start something new: `nevis init learner NAME` writes a learner folder.")

_stderr = Console(stderr=True)


def main() -> None:
    """Console entry point."""
    try:
        app()
    except NevisError as exc:
        _stderr.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


__all__ = ["app", "main"]


if __name__ == "__main__":
    main()
