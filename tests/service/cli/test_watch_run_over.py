"""``llmduel campaign watch`` (service/cli/campaigns.py) returns once the campaign has ended, its run is over
(``run.active`` false: its last duels in flight recorded) and its spend is final (``spend_final``, when the server
sends it), so the spend it prints is final."""

from __future__ import annotations

import argparse
import contextlib

from service.cli import campaigns


def _watch(monkeypatch, views: list[dict]) -> list[dict]:
    """``campaign watch`` against a server that returns ``views`` in turn; the views it read."""
    seen: list[dict] = []

    class Remote:
        def campaign(self, cid):
            seen.append(views[min(len(seen), len(views) - 1)])
            return seen[-1]

    monkeypatch.setattr(campaigns, "remote_from_args", lambda args: contextlib.nullcontext(Remote()))
    monkeypatch.setattr(campaigns, "progress_line", lambda c: f"spend {c['spend']}")
    monkeypatch.setattr(campaigns, "verdict_line", lambda c: f"ended, spend {c['spend']}")
    monkeypatch.setattr(campaigns, "exact_lines", lambda c: [])
    monkeypatch.setattr(campaigns, "_bias_warnings", lambda remote, cid: None)
    monkeypatch.setattr(campaigns.time, "sleep", lambda s: None)
    assert campaigns.cmd_watch(argparse.Namespace(id=7, interval=0.0, every=0.0)) == 0
    return seen


def test_campaign_watch_waits_for_the_ended_campaigns_run_to_be_over(monkeypatch, capsys):
    """``llmduel campaign watch`` prints the verdict (and the spend) of the first view whose campaign has ended
    and whose run is over, not of the first ended one (a server without ``spend_final``)."""
    views = [
        {"status": "running", "run": {"active": True}, "spend": 0.5, "judge": {"kind": "llm"}},
        {"status": "stopped", "run": {"active": True}, "spend": 1.0, "judge": {"kind": "llm"}},  # its last duels
        {"status": "stopped", "run": {"active": False}, "spend": 1.5, "judge": {"kind": "llm"}},
    ]
    seen = _watch(monkeypatch, views)
    assert len(seen) == 3 and capsys.readouterr().out.strip() == "ended, spend 1.5"


def test_campaign_watch_waits_for_the_spend_to_be_final(monkeypatch, capsys):
    """With ``spend_final`` in the view, ``watch`` goes on past an ended campaign whose run is over while a call
    of it can still be charged (an owner stalled past its lease, an annotator's duel called at the stop)."""
    views = [
        {"status": "stopped", "run": {"active": True}, "spend": 1.0, "spend_final": False, "judge": {"kind": "llm"}},
        {"status": "stopped", "run": {"active": False}, "spend": 1.2, "spend_final": False, "judge": {"kind": "llm"}},
        {"status": "stopped", "run": {"active": False}, "spend": 1.5, "spend_final": True, "judge": {"kind": "llm"}},
    ]
    seen = _watch(monkeypatch, views)
    assert len(seen) == 3 and capsys.readouterr().out.strip() == "ended, spend 1.5"
