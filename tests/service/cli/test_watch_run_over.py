"""``llmduel campaign watch`` (service/cli/campaigns.py) returns once the campaign has ended and its run is over
(``run.active`` false: its last duels in flight recorded), so the spend it prints is final."""

from __future__ import annotations


def test_campaign_watch_waits_for_the_ended_campaigns_run_to_be_over(monkeypatch, capsys):
    """``llmduel campaign watch`` prints the verdict (and the spend) of the first view whose campaign has ended
    and whose run is over, not of the first ended one: the spend it shows is final."""
    import argparse
    import contextlib

    from service.cli import campaigns

    views = [
        {"status": "running", "run": {"active": True}, "spend": 0.5, "judge": {"kind": "llm"}},
        {
            "status": "stopped",
            "run": {"active": True},
            "spend": 1.0,
            "judge": {"kind": "llm"},
        },  # ended, its last duels in flight
        {"status": "stopped", "run": {"active": False}, "spend": 1.5, "judge": {"kind": "llm"}},
    ]
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
    args = argparse.Namespace(id=7, interval=0.0, every=0.0)
    assert campaigns.cmd_watch(args) == 0
    assert len(seen) == 3 and capsys.readouterr().out.strip() == "ended, spend 1.5"
