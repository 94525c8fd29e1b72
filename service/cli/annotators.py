"""``llmduel annotator add|list|revoke``: manage a campaign's annotators on a running server.

Talks to the REST API through :mod:`service.cli.remote` (``--url``/``LLMDUEL_URL``,
``--key``/``LLMDUEL_API_KEY``):

* ``add CAMPAIGN_ID [--label L] [--json]``: ``POST /v1/campaigns/{id}/annotators``;
  prints the voting link (it holds the token: send it to the annotator privately);
* ``list CAMPAIGN_ID [--json]``: ``GET /v1/campaigns/{id}/annotators``, a table of
  id, label, votes, skips, agreement, shared items, state;
* ``revoke CAMPAIGN_ID ANNOTATOR_ID``: ``DELETE /v1/campaigns/{id}/annotators/{aid}``.
"""

from __future__ import annotations

import json

from service.cli.args import record_id
from service.cli.remote import add_remote_arguments, remote_from_args


def add_annotator_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "annotator",
        help="add, list or revoke a campaign's annotators (on a running server)",
        description="Manage the annotators of a human-judged campaign on a running llmduel server.",
    )
    sub = p.add_subparsers(dest="annotator_command", required=True, metavar="ACTION")
    campaign = record_id("CAMPAIGN_ID")

    add = sub.add_parser("add", help="create an annotator and print its voting link")
    add.add_argument("campaign_id", type=campaign, metavar="CAMPAIGN_ID")
    add.add_argument("--label", default=None, help="a name shown on the dashboards (e.g. 'alice')")
    add.add_argument("--json", action="store_true", help="print the API's answer as JSON (token and url)")
    add_remote_arguments(add)
    add.set_defaults(handler=cmd_add)

    ls = sub.add_parser("list", help="list annotators with their votes and agreement")
    ls.add_argument("campaign_id", type=campaign, metavar="CAMPAIGN_ID")
    ls.add_argument("--json", action="store_true", help="print the list as JSON")
    add_remote_arguments(ls)
    ls.set_defaults(handler=cmd_list)

    rv = sub.add_parser("revoke", help="revoke an annotator's link (its pending duels are released)")
    rv.add_argument("campaign_id", type=campaign, metavar="CAMPAIGN_ID")
    rv.add_argument("annotator_id", type=record_id("ANNOTATOR_ID"), metavar="ANNOTATOR_ID")
    add_remote_arguments(rv)
    rv.set_defaults(handler=cmd_revoke)


def cmd_add(args) -> int:
    body = {"label": args.label} if args.label is not None else None
    with remote_from_args(args) as remote:
        out = remote.post(f"/v1/campaigns/{args.campaign_id}/annotators", json=body)
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        name = out.get("label") or f"annotator {out['id']}"
        print(f"annotator {out['id']} ({name}) of campaign {args.campaign_id}; voting link (send it privately):")
        print(out["url"])
    return 0


def _agreement(value) -> str:
    return "-" if value is None else f"{value:.2f}"


def cmd_list(args) -> int:
    with remote_from_args(args) as remote:
        rows = remote.get(f"/v1/campaigns/{args.campaign_id}/annotators")
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"campaign {args.campaign_id} has no annotators (add one with `llmduel annotator add`)")
        return 0
    table = [("id", "label", "votes", "skips", "agreement", "shared", "state")]
    for r in rows:
        state = f"revoked {r['revoked_at'][:19]}" if r["revoked_at"] else "active"
        label = " ".join(str(r["label"] or "-").split())[:40]
        table.append(
            (
                str(r["id"]),
                label,
                str(r["votes"]),
                str(r.get("skips", 0)),
                _agreement(r["agreement"]),
                str(r["shared_items"]),
                state,
            )
        )
    widths = [max(len(row[k]) for row in table) for k in range(len(table[0]))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
    return 0


def cmd_revoke(args) -> int:
    with remote_from_args(args) as remote:
        out = remote.delete(f"/v1/campaigns/{args.campaign_id}/annotators/{args.annotator_id}")
    print(
        f"annotator {out['id']} ({out.get('label') or 'no label'}) of campaign {args.campaign_id} "
        f"revoked at {out['revoked_at']}; its link is refused from now on"
    )
    return 0
