"""``llmduel campaign ...``: run a real evaluation from a campaign file against a running server.

Every sub-command talks to the server over the REST API (:mod:`service.cli.remote`:
``--url``, else ``LLMDUEL_URL``, else http://127.0.0.1:8000; the admin key from
``LLMDUEL_API_KEY``). Files are read by :mod:`service.campaign_files`; results go
to stdout, progress to stderr, bad input is one line on stderr with exit code 2.

* ``create FILE [--json] [--no-run] [--dry-run [--trials N]] [--concurrency N] [--allow-outside-prompts]``: create the
  campaign and start its background run when the judge is automatic;
  ``--dry-run`` prints the forecast of its cost instead (nothing is created);
* ``list``, ``show ID`` (with the judge bias report), ``stop ID``;
* ``watch ID``: a progress bar until the campaign ends (a line every ``--every``
  seconds when stderr is not a terminal), then the verdict on stdout and the judge
  bias warnings on stderr, exit 0;
* ``import-answers ID PATH [--model NAME]``: a team's model_answer files into the answer store;
* ``forecast ID [--trials N] [--spread S]``: the pilot forecast from the campaign's duels so far;
* ``archive ID``, ``unarchive ID``, ``delete ID --yes [--remove-stored]``: service/cli/campaign_admin.py;
* ``export ID --out DIR``: certificate.json, battles.jsonl, matrix.csv, ranking.csv/json, ranking_by_category.csv,
  judge_bias.json, and the images the prompts and answers name (images/<sha256>.<ext>);
* ``continue ID [--budget USD] [--max-duels N]``: raise a limit of a campaign that
  ran out of budget or duels and run it again;
* ``resume ID [--concurrency N]``: restart a paused or failed background run with its
  own limits (the server first checks it has every ``api_key_env`` the campaign names).
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
import time
from pathlib import Path
from typing import Any

from service.cli import campaign_admin
from service.cli.args import CLIError, number_in, whole_number
from service.cli.campaign_text import (
    bias_lines,
    exact_lines,
    format_forecast,
    money_text,
    progress_line,
    summary,
    verdict_line,
)
from service.cli.remote import Remote, add_remote_arguments, remote_from_args

AUTOMATIC_JUDGES = ("llm", "jury", "simulated")
RUN_KEYS = {"concurrency", "max_duels"}


def _print_json(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=1)
    sys.stdout.write("\n")


# ---------------------------------------------------------------- commands
def _start_run(remote: Remote, c: dict[str, Any], run: dict[str, Any]) -> dict[str, Any] | None:
    if c["judge"].get("kind") not in AUTOMATIC_JUDGES or c["status"] != "running":
        return None
    return remote.post(f"/v1/campaigns/{c['id']}/run", json=run)


def _run_options(body: dict[str, Any], args: argparse.Namespace, path: str) -> dict[str, Any]:
    given = "run" in body
    run = body.pop("run", None) or {}
    if not isinstance(run, dict) or set(run) - RUN_KEYS:
        raise CLIError(f"{path}: 'run' must be a mapping with concurrency and/or max_duels")
    judge = raw_judge if isinstance(raw_judge := body.get("judge"), dict) else {}
    if given and judge.get("kind") == "human":
        raise CLIError(f"{path}: 'run' starts a background run, which needs an automatic judge; this judge is human")
    if args.concurrency is not None:
        run["concurrency"] = args.concurrency
    from pydantic import ValidationError

    from service.schemas.requests import RunIn

    try:  # checked here, whatever the judge: a bad value is never ignored
        RunIn.model_validate(run)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err.get("loc", ()))
        raise CLIError(f"{path}: run.{where}: {err.get('msg', 'invalid value')}") from None
    return run


#: Seconds `create --dry-run` waits for the forecast (at least; --timeout may say more).
FORECAST_TIMEOUT_S = 300.0


def cmd_create(args: argparse.Namespace) -> int:
    from service.campaign_files import CampaignFileError, read_campaign_file

    try:
        body = read_campaign_file(args.file, allow_outside_prompts=args.allow_outside_prompts)
    except CampaignFileError as exc:
        raise CLIError(str(exc)) from None
    run = _run_options(body, args, args.file)
    if args.trials is not None and not args.dry_run:
        raise CLIError("--trials goes with --dry-run (the number of simulated campaigns of the forecast)")
    with remote_from_args(args) as remote:
        if args.dry_run:
            params = {"trials": args.trials} if args.trials is not None else None
            # every trial runs: allow the server minutes, not the default request timeout
            forecast = remote.post(
                "/v1/campaigns/forecast", json=body, params=params, timeout=max(args.timeout, FORECAST_TIMEOUT_S)
            )
            if args.json:
                _print_json(forecast)
            else:
                sys.stdout.write(format_forecast(forecast))
            return 0
        c = remote.create_campaign(body)
        started = None if args.no_run else _start_run(remote, c, run)
        dashboard = f"{remote.url}/campaigns/{c['id']}"
    if args.json:
        _print_json({**c, "run_started": started is not None})
        return 0
    sys.stdout.write(summary(c))
    print(f"  dashboard  {dashboard}")
    if started is not None:
        print(f"  started the background run (concurrency {started['run']['concurrency']})")
        print(f"watch it:  llmduel campaign watch {c['id']}")
    elif c["judge"].get("kind") in ("human", "hybrid"):
        print(f"human judge: create a voting link per annotator:  llmduel annotator add {c['id']} --label NAME")
    else:
        print(f"held (--no-run); start it with:  llmduel campaign resume {c['id']}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit}
    if args.status:
        params["status"] = args.status
    if args.archived:
        params["archived"] = "true"
    with remote_from_args(args) as remote:
        page = remote.get("/v1/campaigns", params=params)
    if args.json:
        _print_json(page)
        return 0
    print(f"{'id':>5}  {'status':<19} {'duels':>6} {'spend':>10}  {'winner/leader':<20} name")
    for c in page["items"]:
        who = c["winner"] or (f"({c['leader']})" if c.get("leader") else "-")
        print(f"{c['id']:>5}  {c['status']:<19} {c['duels']:>6} {money_text(c['spend']):>10}  {who:<20} {c['name']}")
    if page.get("next_offset") is not None:
        print(f"... {page['total']} campaigns in all (--limit)", file=sys.stderr)
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    with remote_from_args(args) as remote:
        c = remote.campaign(args.id)
        bias = remote.judge_bias(args.id)
    if args.json:
        _print_json({**c, "judge_bias": bias})
    else:
        sys.stdout.write(summary(c) + "".join(line + "\n" for line in bias_lines(bias)))
    return 0


def cmd_forecast(args: argparse.Namespace) -> int:
    """The pilot forecast: what certifying the campaign should still cost, from its duels so far."""
    with remote_from_args(args) as remote:
        forecast = remote.pilot_forecast(
            args.id, trials=args.trials, spread=args.spread, timeout=max(args.timeout, FORECAST_TIMEOUT_S)
        )
    if args.json:
        _print_json(forecast)
    else:
        sys.stdout.write(format_forecast(forecast))
    return 0


def cmd_import_answers(args: argparse.Namespace) -> int:
    """Answers a team already has (arena-hard's model_answer files) into the answer store."""
    from service.answer_files import read_answers
    from service.campaign_files import CampaignFileError

    try:
        by_model = read_answers(args.path)
    except CampaignFileError as exc:
        raise CLIError(str(exc)) from None
    if args.model is not None:  # every answer read is this campaign model's
        by_model = {args.model: [a for answers in by_model.values() for a in answers]}
    results = []
    with remote_from_args(args) as remote:
        for model, answers in by_model.items():
            results.append(remote.import_answers(args.id, model, answers))
    if args.json:
        _print_json(results)
        return 0
    for r in results:
        print(
            f"{r['model']}: {r['imported']} imported, {r['already_stored']} already stored, "
            f"{r['duplicates']} repeated, {r['unknown']} with a question id the campaign does not have"
            + (f" (first: {', '.join(r['unknown_question_ids'][:5])})" if r["unknown"] else "")
        )
    return 0


def cmd_stop(args: argparse.Namespace) -> int:
    with remote_from_args(args) as remote:
        c = remote.stop(args.id)
    if args.json:
        _print_json(c)
    else:
        print(f"campaign {c['id']} {c['status']}: {verdict_line(c)}")
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    tty = sys.stderr.isatty()
    last_line = 0.0
    with remote_from_args(args) as remote:
        while True:
            c = remote.campaign(args.id)
            line = progress_line(c)
            now = time.monotonic()
            # ended, its run (if any) has recorded its last duels in flight, and no call of it can still be
            # charged: the spend is final (a server from before spend_final: the run alone)
            over = c["status"] != "running" and not (c.get("run") or {}).get("active") and c.get("spend_final", True)
            if tty:
                sys.stderr.write("\r\x1b[2K" + line)
                sys.stderr.flush()
            elif now - last_line >= args.every or over:
                print(line, file=sys.stderr, flush=True)
                last_line = now
            if over:
                if tty:
                    sys.stderr.write("\n")
                print(verdict_line(c))
                for line in exact_lines(c):
                    print(line.strip())
                _bias_warnings(remote, args.id)
                return 0
            run = c.get("run") or {}
            if c["judge"].get("kind") in AUTOMATIC_JUDGES and not run.get("active") and run.get("error"):
                if tty:
                    sys.stderr.write("\n")
                print(f"llmduel: the background run stopped: {run['error']}", file=sys.stderr)
                print(f"llmduel: fix the cause, then: llmduel campaign resume {c['id']}", file=sys.stderr)
                return 1
            time.sleep(args.interval)


def _bias_warnings(remote: Remote, cid: Any) -> None:
    """The judge bias warnings of an ended campaign, on stderr (a server without the report: none)."""
    try:
        bias = remote.judge_bias(cid)
    except CLIError:
        return
    for w in bias.get("warnings") or []:
        print(f"llmduel: warning: {w} (llmduel campaign show {cid})", file=sys.stderr)


#: What an export may write: a plain file name, or one inside model_answer/ (no dot first, no other folder).
SAFE_EXPORT_NAME = re.compile(r"(model_answer/)?[A-Za-z0-9_-][A-Za-z0-9._-]*")
#: An exported image: images/<sha256>.<extension>.
SAFE_IMAGE_NAME = re.compile(r"images/[0-9a-f]{64}\.(png|jpg|webp|gif)")


def cmd_export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CLIError(f"--out {out} exists and is not a directory")
    with remote_from_args(args) as remote:
        data = remote.get(f"/v1/campaigns/{args.id}/export")
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        raise CLIError("the server's export has no files")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            if not SAFE_EXPORT_NAME.fullmatch(name):
                raise CLIError(f"the server sent an unsafe file name {name!r}")
            (out / name).parent.mkdir(exist_ok=True)
            (out / name).write_text(text, encoding="utf-8")
        images = data.get("images") or {}
        for name, b64 in images.items():
            if not SAFE_IMAGE_NAME.fullmatch(name) or not isinstance(b64, str):
                raise CLIError(f"the server sent an unsafe image name {name!r}")
            (out / "images").mkdir(exist_ok=True)
            (out / name).write_bytes(base64.b64decode(b64))
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot write to {out}: {getattr(exc, 'strerror', None) or exc}") from None
    for name in [*files, *images]:
        print(out / name)
    return 0


def cmd_continue(args: argparse.Namespace) -> int:
    if args.budget is None and args.max_duels is None:
        raise CLIError("continue needs --budget and/or --max-duels (the new, higher limit)")
    patch: dict[str, Any] = {}
    if args.budget is not None:
        patch["budget"] = args.budget
    if args.max_duels is not None:
        patch["max_duels"] = args.max_duels
    with remote_from_args(args) as remote:
        remote.patch(f"/v1/campaigns/{args.id}", json=patch)
        c = remote.campaign(args.id)
        run = {"concurrency": args.concurrency} if args.concurrency else {}
        started = None if args.no_run else _start_run(remote, c, run)
    if args.json:
        _print_json({**c, "run_started": started is not None})
        return 0
    sys.stdout.write(summary(c))
    if started is not None:
        print(f"watch it:  llmduel campaign watch {c['id']}")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    body = {"concurrency": args.concurrency} if args.concurrency else {}
    with remote_from_args(args) as remote:
        out = remote.post(f"/v1/campaigns/{args.id}/resume", json=body)
    if args.json:
        _print_json(out)
        return 0
    run = out["run"]
    left = "" if run.get("remaining") is None else f", {run['remaining']} duels left in this run"
    print(f"campaign {args.id}: resumed the background run (concurrency {run['concurrency']}{left})")
    if out.get("previous_error"):
        print(f"  it had stopped: {out['previous_error']}")
    print(f"watch it:  llmduel campaign watch {args.id}")
    return 0


# ---------------------------------------------------------------- parser
def _usd(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--budget must be a number of USD, got {text!r}") from None
    if not v > 0 or v != v or v == float("inf"):
        raise argparse.ArgumentTypeError(f"--budget must be > 0, got {text}")
    return v


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < v <= 3600:
        raise argparse.ArgumentTypeError(f"expected seconds in (0, 3600], got {text}")
    return v


def _campaign_id(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a campaign id is a whole number, got {text!r}") from None
    if not 1 <= v <= 2**62:
        raise argparse.ArgumentTypeError(f"a campaign id is >= 1, got {v}")
    return v


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "campaign",
        help="create, watch and export campaigns on a running server (docs/guide.md)",
        description="Campaigns on a running llmduel server (--url, else LLMDUEL_URL, else http://127.0.0.1:8000; "
        "the admin key from LLMDUEL_API_KEY). See docs/guide.md.",
    )
    csub = p.add_subparsers(dest="campaign_command", metavar="ACTION", parser_class=type(p))
    p.set_defaults(handler=lambda a: (p.print_help(sys.stderr), 2)[1])

    def action(name: str, help: str, handler, *, with_id: bool = True, json_flag: bool = True):
        a = csub.add_parser(name, help=help, description=help)
        if with_id:
            a.add_argument("id", type=_campaign_id, metavar="ID")
        if json_flag:
            a.add_argument("--json", action="store_true", help="print JSON for machines")
        add_remote_arguments(a)
        a.set_defaults(handler=handler)
        return a

    a = action("create", "create a campaign from a YAML/JSON campaign file and start it", cmd_create, with_id=False)
    a.add_argument("file", metavar="FILE", help="campaign file (YAML or JSON; prompts inline or {file: ...})")
    a.add_argument("--no-run", action="store_true", help="create it but do not start the background run")
    a.add_argument("--dry-run", action="store_true", help="print the forecast of its cost; create nothing")
    a.add_argument(
        "--allow-outside-prompts",
        action="store_true",
        help="read a prompts file given by an absolute path or outside the campaign file's folder (refused by default)",
    )
    a.add_argument(
        "--trials",
        type=whole_number("--trials"),
        default=None,
        help="--dry-run: simulated campaigns, 10 to 1000 (default 200, fewer beyond 16 models; all of them run)",
    )
    a.add_argument(
        "--concurrency", type=whole_number("--concurrency"), default=None, help="duels in flight (default 1)"
    )

    a = action("list", "list campaigns, newest first", cmd_list, with_id=False)
    a.add_argument("--status", default=None, help="only campaigns with this status")
    a.add_argument("--archived", action="store_true", help="list the archived campaigns instead")
    a.add_argument("--limit", type=whole_number("--limit"), default=50, help="at most this many (default 50)")

    action("show", "a campaign's status, spend and verdict", cmd_show)

    a = action("watch", "a progress bar until the campaign ends, then its verdict", cmd_watch, json_flag=False)
    a.add_argument("--interval", type=_seconds, default=1.0, help="seconds between polls (default 1)")
    a.add_argument(
        "--every", type=_seconds, default=10.0, help="seconds between progress lines when not a terminal (default 10)"
    )

    action("stop", "end a running campaign", cmd_stop)
    campaign_admin.add_actions(action)

    a = action("forecast", "forecast the cost to certify from the campaign's duels so far (pilot)", cmd_forecast)
    a.add_argument(
        "--trials", type=whole_number("--trials"), default=None, help="simulated campaigns, 10 to 1000 (default 200)"
    )
    a.add_argument(
        "--spread",
        type=number_in("--spread", 0, 5),
        default=None,
        help="prior strength spread (default: learned from the campaign's counts and the stored campaigns)",
    )

    a = action(
        "export",
        "write certificate.json, battles.jsonl, matrix.csv, ranking.csv/json, ranking_by_category.csv, judge_bias.json",
        cmd_export,
    )
    a.add_argument("--out", required=True, metavar="DIR", help="directory to write the files to (created)")

    a = action(
        "import-answers",
        "import a model's answers (arena-hard model_answer files) into the answer store: the campaign pays nothing "
        "for them",
        cmd_import_answers,
    )
    a.add_argument("path", metavar="PATH", help="a model_answer folder (every *.jsonl) or one .jsonl file")
    a.add_argument(
        "--model", default=None, help="the campaign model the answers are from (default: each line's model_id)"
    )

    a = action("continue", "raise the budget or duel cap of an ended campaign and run it again", cmd_continue)
    a.add_argument("--budget", type=_usd, default=None, help="the new budget in USD")
    a.add_argument("--max-duels", type=whole_number("--max-duels"), default=None, help="the new duel cap")
    a.add_argument("--no-run", action="store_true", help="do not restart the background run")
    a.add_argument("--concurrency", type=whole_number("--concurrency"), default=None, help="duels in flight")

    a = action("resume", "restart a paused or failed background run with its own limits", cmd_resume)
    a.add_argument(
        "--concurrency", type=whole_number("--concurrency"), default=None, help="duels in flight (default: the run's)"
    )
