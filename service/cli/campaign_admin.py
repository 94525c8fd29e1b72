"""``llmduel campaign archive | unarchive | delete``: a campaign's place in the lists, and its removal
(service/campaigns/removal.py says what each keeps)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Callable, Literal

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
