"""``llmduel campaign archive | unarchive | delete``: a campaign's place in the lists, and its removal
(service/campaigns/removal.py says what each keeps); ``disable-model | replace-model``: a failing model
taken out of a running campaign (docs/guide.md, A failing model)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Literal

from service.campaign_files import CampaignFileError, read_model_file
from service.cli.args import CLIError
from service.cli.remote import remote_from_args


def _archive(args: argparse.Namespace, archived: bool) -> int:
    with remote_from_args(args) as remote:
        out = remote.archive(args.id, archived)
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"campaign {out['id']}: {'archived (hidden from the lists)' if out['archived'] else 'in the lists'}")
    return 0


def cmd_archive(args: argparse.Namespace) -> int:
    return _archive(args, True)


def cmd_unarchive(args: argparse.Namespace) -> int:
    return _archive(args, False)


def cmd_delete(args: argparse.Namespace) -> int:
    if not args.yes:
        raise CLIError(
            f"deleting campaign {args.id} removes its duels and its ledger for good: export it first, then add --yes"
        )
    stored: Literal["keep", "remove"] = "remove" if args.remove_stored else "keep"
    with remote_from_args(args) as remote:
        out = remote.delete_campaign(args.id, stored=stored)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    removed = out["stored_removed"]
    tail = (
        f"; removed {removed['answers']} stored answers and {removed['verdicts']} stored verdicts it paid for"
        if stored == "remove"
        else "; the answers and verdicts it paid for stay in the stores"
    )
    print(f"campaign {out['id']} deleted{tail}", file=sys.stdout)
    return 0


def _changed(args: argparse.Namespace, out: dict[str, Any]) -> int:
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    change, c = out["change"], out["campaign"]
    active = [m["name"] for m in c["models"] if m.get("status", "active") == "active"]
    what = f"replaced by {change['added']['name']}" if change.get("added") else "disabled"
    print(f"campaign {c['id']}: {change['model']} {what}; the campaign now compares {', '.join(active)}")
    print(
        f"  the certificate is about these {len(active)} models (each at delta/{len(active)} for a winner); "
        f"{change['model']}'s duels stay in the log and no longer count"
    )
    if c["status"] != "running":
        print(f"  {c['status']}: {c.get('end_reason') or ''}".rstrip())
    elif out.get("run"):
        print(f"  its background run restarted (concurrency {out['run']['concurrency']})")
    return 0


def cmd_disable_model(args: argparse.Namespace) -> int:
    with remote_from_args(args) as remote:
        out = remote.disable_model(args.id, args.model, reason=args.reason, resume=not args.no_resume)
    return _changed(args, out)


def cmd_replace_model(args: argparse.Namespace) -> int:
    try:
        model = read_model_file(args.with_file)
    except CampaignFileError as exc:
        raise CLIError(str(exc)) from None
    with remote_from_args(args) as remote:
        out = remote.replace_model(args.id, args.model, model, reason=args.reason, resume=not args.no_resume)
    return _changed(args, out)


def add_actions(action: Callable[..., Any]) -> None:
    """Register the actions on ``llmduel campaign`` (``action`` is campaigns.add_parsers' helper)."""
    action("archive", "hide a campaign from the lists, keeping every row (unarchive brings it back)", cmd_archive)
    action("unarchive", "bring an archived campaign back to the lists", cmd_unarchive)
    a = action("delete", "delete an ended campaign, its duels and its ledger (export it first)", cmd_delete)
    a.add_argument("--yes", action="store_true", help="really delete (required)")
    a.add_argument(
        "--remove-stored",
        action="store_true",
        help="also remove the answers and verdicts it paid for from the shared stores (default: keep them for reuse)",
    )
    a = action(
        "disable-model",
        "take a failing model out of a running campaign: it goes on with the others (the certificate is then "
        "about them)",
        cmd_disable_model,
    )
    a.add_argument("model", metavar="MODEL", help="the model's name")
    a.add_argument("--reason", default=None, help="why (stored with the change and shown)")
    a.add_argument("--no-resume", action="store_true", help="do not restart a run that had stalled")
    a = action(
        "replace-model",
        "replace a model of a running campaign by a new one (disable it and add the new model, with no evidence yet)",
        cmd_replace_model,
    )
    a.add_argument("model", metavar="MODEL", help="the name of the model to replace")
    a.add_argument(
        "--with",
        dest="with_file",
        required=True,
        metavar="FILE",
        help="a YAML or JSON file with the new model (name, client, cost: as an entry of a campaign file's models)",
    )
    a.add_argument("--reason", default=None, help="why (stored with the change and shown)")
    a.add_argument("--no-resume", action="store_true", help="do not restart a run that had stalled")
