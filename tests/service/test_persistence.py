"""Schema, stored state vs replayed log, restarts and several service instances
on one database (as with several worker processes)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from conftest import make_settings
from service_helpers import campaign_body, simulated_judge
from sqlalchemy import text

from service.campaigns import draws


def make_service(url: str, **overrides):
    from service.container import build_campaigns
    from service.db import Database

    settings = make_settings(url, **overrides)
    return build_campaigns(settings, Database(settings.database_url))


def create(svc, **kw) -> int:
    from service.schemas import CampaignCreate

    return svc.lifecycle.create_campaign(CampaignCreate(**campaign_body(**kw)))


def human_duel(svc, cid: int, choice: str = "a") -> dict:
    """One human-judged duel through the service layer (models called for real)."""
    from service.auth import Principal
    from service.campaigns.judge_charges import Judgement
    from service.cycle import record_verdict

    admin = Principal(admin=True)
    view, _ = asyncio.run(svc.cycle.next_duel(cid, admin))
    if choice is not None:
        return record_verdict(svc.cycle, view["id"], Judgement(choice, "admin")).view
    return view


# ---------------------------------------------------------------- schema
def test_models_match_the_migrations(db_url):
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext

    from service.db import Database, head_revision
    from service.models import Base

    db = Database(db_url)
    try:
        assert db.current_revision() == head_revision()
        with db.engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
        assert diff == []
    finally:
        db.dispose()


def test_db_upgrade_command_and_auto_upgrade_of_a_new_sqlite_file(tmp_path, monkeypatch, capsys):
    from service.app import create_app
    from service.cli import main
    from service.db import Database, head_revision

    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    assert main(["db", "current"]) == 2  # reading creates no database (tests/service/cli/test_cli_read_only.py)
    assert "no such file" in capsys.readouterr().err and not (tmp_path / "cli.db").exists()
    (tmp_path / "cli.db").touch()
    assert main(["db", "current"]) == 0
    assert "(empty)" in capsys.readouterr().out
    assert main(["db", "upgrade"]) == 0
    assert main(["db", "current"]) == 0
    assert capsys.readouterr().out.strip() == f"{head_revision()} (head)"

    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    app = create_app(make_settings(fresh, auto_migrate="sqlite"))
    app.state.db.dispose()
    db = Database(fresh)
    assert db.current_revision() == head_revision()
    with db.engine.connect() as conn:
        tables = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")}
    db.dispose()
    assert {"campaigns", "duels", "charges", "annotators", "prompts"} <= tables


# ---------------------------------------------------------------- replay
def test_replay_detects_tampering_and_cli_exit_codes(db_url, monkeypatch, capsys):
    from service.cli import main

    svc = make_service(db_url)
    try:
        cid = create(svc, tie_policy="random")
        for choice in ["a", "b", "tie", "a", "both_bad", "b"]:
            human_duel(svc, cid, choice)
        human_duel(svc, cid, None)  # one still pending
        result = svc.replay.replay(cid)
        assert result.ok, result.diff
        assert result.events == 7 + 6

        monkeypatch.setenv("DATABASE_URL", db_url)
        assert main(["replay", str(cid)]) == 0
        assert "equals the replayed log" in capsys.readouterr().out
        assert main(["replay", "987654321"]) == 2

        # Tamper with the stored state: one more win for the pair's first arm.
        with svc.db.engine.begin() as conn:
            raw = conn.execute(
                text("SELECT policy_state FROM policy_checkpoints WHERE campaign_id = :id"), {"id": cid}
            ).scalar_one()
            state = raw if isinstance(raw, dict) else json.loads(raw)
            state["W"][0] += 1.0
            conn.execute(
                text("UPDATE policy_checkpoints SET policy_state = :s WHERE campaign_id = :id"),
                {"s": json.dumps(state), "id": cid},
            )
        result = svc.replay.replay(cid)
        assert not result.ok
        assert any(line.startswith("policy_state.W[0]") for line in result.diff), result.diff
        assert main(["replay", str(cid)]) == 1
        out = capsys.readouterr().out
        assert "differs" in out and "policy_state.W[0]" in out
        assert main(["replay", str(cid), "--json"]) == 1
        assert json.loads(capsys.readouterr().out)["ok"] is False
        # the views still answer (the stored figures), whatever the state: the replay is what reports it
        listed = svc.views.list_campaigns(100, 0)["items"]
        assert cid in [c["id"] for c in listed]
        assert svc.views.get_campaign(cid)["id"] == cid

        # Tamper with the ledger: the spend no longer matches the charges.
        with svc.db.engine.begin() as conn:
            conn.execute(
                text(
                    "UPDATE charges SET amount_nusd = amount_nusd + 1 WHERE id = "
                    "(SELECT MIN(id) FROM charges WHERE campaign_id = :id)"
                ),
                {"id": cid},
            )
        assert any(line.startswith("spend_nusd") for line in svc.replay.replay(cid).diff)
    finally:
        svc.db.dispose()


# ---------------------------------------------------------------- restarts, several instances
def test_two_service_instances_on_one_database_stay_consistent(db_url):
    """Like two worker processes: each keeps a policy cache, and each must notice
    the other's writes (the cache is keyed by the campaign's event counter)."""
    one, two = make_service(db_url), make_service(db_url)
    try:
        cid = create(one, delta=0.001)
        for n in range(12):
            svc = (one, two)[n % 3 == 0]
            human_duel(svc, cid, "ab"[n % 2])
        view = one.views.get_campaign(cid)
        assert view["duels"] == 12 and view["t"] == 12 and view["pending"] == 0
        assert one.replay.replay(cid).ok and two.replay.replay(cid).ok
    finally:
        one.db.dispose()
        two.db.dispose()


def test_a_restarted_service_continues_from_the_stored_state(db_url):
    first = make_service(db_url)
    cid = create(first, judge=simulated_judge())
    run = asyncio.run(_run_some(first, cid, 20))
    assert run["duels"] == 20
    first.db.dispose()

    second = make_service(db_url)  # a new process: empty caches
    try:
        run = asyncio.run(_run_some(second, cid, 15))
        assert run["duels"] == 35 and run["duels_created"] == 35
        assert second.replay.replay(cid).ok
    finally:
        second.db.dispose()


async def _run_some(svc, cid: int, n: int) -> dict:
    await svc.runs.start_run(cid, n, 1)
    deadline = time.monotonic() + 90
    while svc.runs.run_active_here(cid) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await svc.aclose()
    return svc.views.get_campaign(cid)


def test_active_runs_resume_at_start(db_url):
    svc = make_service(db_url)
    try:
        cid = create(svc, judge=simulated_judge())
        svc.lifecycle.start_run_tx(cid, 7, 1)  # as if the process died with its run active

        async def resume():
            ids = await svc.runs.resume_runs()
            assert cid in ids
            deadline = time.monotonic() + 90
            while svc.runs.run_active_here(cid) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await svc.aclose()

        asyncio.run(resume())
        view = svc.views.get_campaign(cid)
        assert view["duels"] == 7 and view["run"]["active"] is False
    finally:
        svc.db.dispose()


def test_prompts_are_stored_apart_and_drawn_from_the_campaigns_secret_key(db_url, monkeypatch):

    svc = make_service(db_url)
    try:
        prompts = [f"prompt {n}" for n in range(50)]
        # The draws follow the campaign's secret draw key, not its (public, guessable) seed ...
        a = create(svc, prompts=prompts, seed=11)
        b = create(svc, prompts=prompts, seed=11)
        drawn_a = [human_duel(svc, a, "a")["prompt"] for _ in range(5)]
        drawn_b = [human_duel(svc, b, "a")["prompt"] for _ in range(5)]
        assert drawn_a != drawn_b and set(drawn_a) <= set(prompts) and len(set(drawn_a)) > 1
        # ... and the same key draws the same prompts.
        monkeypatch.setattr(draws, "new_draw_key", lambda: "ab" * 32)
        c, d = create(svc, prompts=prompts, seed=1), create(svc, prompts=prompts, seed=2)
        drawn_c = [human_duel(svc, c, "a")["prompt"] for _ in range(5)]
        assert drawn_c == [human_duel(svc, d, "a")["prompt"] for _ in range(5)] and len(set(drawn_c)) > 1
        assert svc.views.get_campaign(a)["n_prompts"] == 50
    finally:
        svc.db.dispose()


@pytest.mark.parametrize("bad", ["\ud800", "a\x00b"])
def test_unstorable_model_output_is_cleaned(bad):
    from service.campaigns import clean_text

    cleaned = clean_text(f"answer {bad} end")
    cleaned.encode("utf-8")
    assert "\x00" not in cleaned and cleaned.startswith("answer ") and cleaned.endswith(" end")
