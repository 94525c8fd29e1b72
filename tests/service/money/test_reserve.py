"""The budget reserves what a duel may still pay, and pre-generation holds its calls' bounds.

* A duel whose answers (and, with an LLM judge, verdict) are already stored reserves
  nothing for them, so a campaign whose remaining budget is below a full duel bound
  keeps running on stored answers; the spend never exceeds the budget, also under
  concurrent requests.
* Pre-generation with a budget: each call holds its bound (``budget_holds``) before it
  is made, the hold is released when the answer is charged or the call fails, a hold
  of a dead process lapses, and two services on one database never overrun the budget.

Providers are stood in by respx; SQLite and PostgreSQL (the ``api`` fixture).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid

import httpx
import pytest
import respx
from conftest import app_client
from service_helpers import RESERVE_PRICE, RESERVE_URL, reserve_human_body, reserve_model, reserve_reply, reserve_tag
from sqlalchemy import func, select

from service.campaigns import draws, store_claims, store_keys, store_lookup
from service.models import BudgetHold, Campaign, Charge, Duel, StoredAnswer, StoredVerdict, to_nusd, utcnow
from service.money import reserve
from service.money.bounds import model_bound_nusd


def _campaign(svc, cid: int):
    with svc.db.read() as s:
        c = s.get(Campaign, cid)
        return type("Row", (), {"models": list(c.models), "spend_nusd": int(c.spend_nusd)})


def _store_answers(svc, cid: int, prompts: list[str], models: list[int] | None = None) -> None:
    """Stored answers of the campaign's models to ``prompts``, as a former campaign would have left them."""
    c = _campaign(svc, cid)
    now = utcnow()
    with svc.db.write() as s:
        for n, m in enumerate(c.models):
            if models is not None and n not in models:
                continue
            mkey = store_keys.model_key(m)
            for p in prompts:
                ph = store_keys.prompt_hash(p)
                s.add(
                    StoredAnswer(
                        key=store_keys.answer_key(mkey, ph),
                        model_key=mkey,
                        prompt_hash=ph,
                        status=store_claims.READY,
                        text=f"stored answer of {m['name']} to {p}",
                        cost_nusd=0,
                        charge_id=None,
                        claimed_at=now,
                        created_at=now,
                    )
                )


def _reservations(svc, cid: int) -> list[int]:
    with svc.db.read() as s:
        return [
            int(x)
            for x in s.execute(
                select(Duel.expected_cost_nusd).where(Duel.campaign_id == cid).order_by(Duel.number)
            ).scalars()
        ]


def _holds(svc, cid: int) -> int:
    with svc.db.read() as s:
        return int(s.execute(select(func.count(BudgetHold.id)).where(BudgetHold.campaign_id == cid)).scalar_one())


def _ledger(svc, cid: int) -> int:
    with svc.db.read() as s:
        return int(
            s.execute(
                select(func.coalesce(func.sum(Charge.amount_nusd), 0)).where(Charge.campaign_id == cid)
            ).scalar_one()
        )


# ---------------------------------------------------------------- the rule
def test_stored_answers_and_verdicts_reserve_nothing():
    ms = [reserve_model("t", n) for n in "ab"]
    bound = model_bound_nusd(ms[0], "q")
    human = {"kind": "human", "fee_per_vote": 0.01}
    assert (
        reserve.reserve_duel_nusd(ms, 0, 1, judge=human, prompt="q", judge_spent_nusd=0, duels_done=0)
        == 2 * bound + 10_000_000
    )
    assert (
        reserve.reserve_duel_nusd(
            ms, 0, 1, judge=human, prompt="q", judge_spent_nusd=0, duels_done=0, stored_answers=[1]
        )
        == bound + 10_000_000
    )
    assert (
        reserve.reserve_duel_nusd(
            ms, 0, 1, judge=human, prompt="q", judge_spent_nusd=0, duels_done=0, stored_answers=[0, 1]
        )
        == 10_000_000
    )
    judge = {
        "kind": "llm",
        "both_orders": True,
        "client": {"kind": "openai", "model": "j", "price": RESERVE_PRICE, "max_cost_per_query": 0.01},
    }
    assert (
        reserve.reserve_duel_nusd(
            ms, 0, 1, judge=judge, prompt="q", judge_spent_nusd=0, duels_done=0, stored_answers=[0, 1]
        )
        == 2 * 10_000_000
    )
    assert (
        reserve.reserve_duel_nusd(
            ms, 0, 1, judge=judge, prompt="q", judge_spent_nusd=0, duels_done=0, stored_answers=[0, 1], stored_orders=1
        )
        == 10_000_000
    )
    assert (
        reserve.reserve_duel_nusd(
            ms, 0, 1, judge=judge, prompt="q", judge_spent_nusd=0, duels_done=0, stored_answers=[0, 1], stored_orders=2
        )
        == 0
    )
    one = dict(judge, both_orders=False)
    assert (
        reserve.reserve_duel_nusd(
            ms, 0, 1, judge=one, prompt="q", judge_spent_nusd=0, duels_done=0, stored_answers=[0, 1], stored_orders=1
        )
        == 0
    )


class _Lookup:
    def __init__(self, answers: dict[str, str], verdicts: set[str]):
        self.answers, self.verdicts, self.asked = answers, verdicts, []

    async def ready_answers(self, keys, with_text):
        self.asked.append(tuple(keys))
        return {k: self.answers[k] for k in keys if k in self.answers}

    async def ready_verdict(self, key):
        self.asked.append(key)
        return key in self.verdicts


def test_what_a_duel_takes_from_the_stores():
    ms = [reserve_model("t", "a"), reserve_model("t", "b"), dict(reserve_model("t", "a"), name="twin")]
    keys = store_lookup.duel_answer_keys("reuse", ms, 0, 1, prompt="q")
    assert set(keys) == {0, 1}
    # one generation config: j is called
    assert store_lookup.duel_answer_keys("reuse", ms, 0, 2, prompt="q") == {0: keys[0]}
    assert store_lookup.duel_answer_keys("fresh", ms, 0, 1, prompt="q") == {}
    judge = {"kind": "llm", "both_orders": True, "client": {"kind": "openai", "model": "j"}}
    texts = {keys[0]: "A", keys[1]: "B"}
    vkey = store_keys.duel_verdict_key(
        judge, "q", None, hash_a=store_keys.text_hash("B"), hash_b=store_keys.text_hash("A")
    )
    known = store_lookup.StoredKeys()
    look = _Lookup({keys[0]: "A"}, {vkey})
    run = store_lookup.run_now

    async def no_reference():
        return None

    def stored(a_is_i=True, keys_known=known, reference=no_reference):
        """What the duel of models 0 and 1 on prompt "q" (reuse on both stores) takes from the stores."""
        return run(
            store_lookup.stored_for_duel(
                keys_known,
                look,
                answers="reuse",
                verdicts="reuse",
                models=ms,
                judge=judge,
                i=0,
                j=1,
                a_is_i=a_is_i,
                prompt="q",
                reference=reference,
            )
        )

    # one answer stored (the other only claimed, or missing): the verdict cannot be known
    assert stored() == store_lookup.DuelStores([0], 0, False)
    look.answers = texts
    # both stored and the verdict (canonical order: either side gives the same key)
    for a_is_i in (True, False):
        assert stored(a_is_i) == store_lookup.DuelStores([0, 1], 2, False)
    asked = len(look.asked)
    stored()
    assert len(look.asked) == asked  # remembered: stored results never change
    # with a reference answer the verdict is another one
    with_reference = stored(keys_known=store_lookup.StoredKeys(), reference=_ref("r"))
    assert with_reference == store_lookup.DuelStores([0, 1], 0, False)
    # a human judge on stored answers: they are pre-generated, the only campaigns whose plan reads budget holds
    human = run(
        store_lookup.stored_for_duel(
            store_lookup.StoredKeys(),
            look,
            answers="reuse",
            verdicts="reuse",
            models=ms,
            judge={"kind": "human"},
            i=0,
            j=1,
            a_is_i=True,
            prompt="q",
            reference=no_reference,
        )
    )
    assert human == store_lookup.DuelStores([0, 1], 0, True)


def _ref(text):
    async def reference():
        return text

    return reference


# ---------------------------------------------------------------- near the budget, on stored answers
@pytest.mark.parametrize("path", ["hot", "general"])
async def test_a_budget_below_a_duel_bound_runs_on_stored_answers(api, monkeypatch, path):
    from service import cycle

    if path == "general":
        monkeypatch.setattr(cycle, "ENABLED", False)
    svc = api.app.state.campaigns.cycle
    tag = reserve_tag()
    prompts = [f"stored question {n}" for n in range(3)]
    fee = 0.01
    body = {
        "name": "near budget",
        "models": [reserve_model(tag, n) for n in "abc"],
        "prompts": prompts,
        "judge": {"kind": "human", "fee_per_vote": fee},
        "budget": 3.5 * fee,  # far below one duel's full bound (two calls of up to 0.2 USD)
        "seed": 3,
    }
    full = reserve.reserve_duel_nusd(
        body["models"], 0, 1, judge=body["judge"], prompt=prompts[0], judge_spent_nusd=0, duels_done=0
    )
    assert full > to_nusd(body["budget"])
    with respx.mock(assert_all_called=False) as mock:
        calls = mock.post(RESERVE_URL).mock(side_effect=reserve_reply())
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        _store_answers(svc, cid, prompts)
        token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "near"})).json()["token"]
        who = {"Authorization": f"Bearer {token}"}
        voted = 0
        for _ in range(10):
            r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
            if r.status_code == 410 or r.status_code == 409:
                break
            assert r.status_code == 201, r.text
            r = await api.post(f"/v1/duels/{r.json()['id']}/vote", headers=who, json={"choice": "a"})
            assert r.status_code == 200, r.text
            voted += 1
        view = (await api.get(f"/v1/campaigns/{cid}")).json()
        assert calls.call_count == 0  # every answer came from the store
    assert voted == 3, view
    assert view["status"] == "budget_exhausted" and view["spend"] == pytest.approx(3 * fee), view
    assert view["spend"] <= body["budget"]
    assert _reservations(svc, cid) == [to_nusd(fee)] * 3  # only the vote fee was reserved
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"]


@pytest.mark.parametrize("path", ["hot", "general"])
async def test_a_stored_verdict_reserves_nothing(api, monkeypatch, path):
    """LLM judge, verdict reuse: once the answers and the verdict are stored a duel reserves 0,
    so a campaign with a tiny budget runs to its duel cap (the verdict lookup on every path)."""
    from service import cycle

    if path == "general":
        monkeypatch.setattr(cycle, "ENABLED", False)
    svc = api.app.state.campaigns.cycle
    tag = reserve_tag()
    judge = {
        "kind": "llm",
        "client": {
            "kind": "openai",
            "base_url": "http://reserve.test/v1",
            "model": f"{tag}-judge",
            "price": RESERVE_PRICE,
            "params": {"max_tokens": 10},
        },
        "orders": "both",  # stored once per pair: the second campaign finds it whatever the presentation
    }
    body = {
        "name": "stored verdict",
        "models": [reserve_model(tag, n) for n in "ab"],
        "prompts": ["the one question"],
        "judge": judge,
        "seed": 4,
        "max_duels": 4,
        # the same prompt again and again: drawn with replacement (without, one prompt ends the campaign)
        "prompt_sampling": "with_replacement",
    }

    def reply(request: httpx.Request) -> httpx.Response:
        if f"{tag}-judge" in request.content.decode():
            return httpx.Response(
                200,
                json={
                    "choices": [{"message": {"role": "assistant", "content": "[[A]]"}}],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 3},
                },
            )
        return reserve_reply(5)(request)

    with respx.mock(assert_all_called=False) as mock:
        calls = mock.post(RESERVE_URL).mock(side_effect=reply)
        first = (await api.post("/v1/campaigns", json=body)).json()["id"]  # no budget: it pays once
        r = await api.post(f"/v1/campaigns/{first}/duels")
        assert r.status_code == 201 and r.json()["status"] == "judged", r.text
        paid = calls.call_count
        assert paid == 4  # two answers, the judge in both orders
        cid = (await api.post("/v1/campaigns", json=dict(body, budget=1e-6))).json()["id"]
        for _ in range(4):
            r = await api.post(f"/v1/campaigns/{cid}/duels")
            assert r.status_code == 201 and r.json()["status"] == "judged", r.text
        assert calls.call_count == paid
    view = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert view["status"] == "stopped" and view["spend"] == 0, view
    assert _reservations(svc, cid) == [0, 0, 0, 0]
    with svc.db.read() as s:
        assert s.execute(select(func.count(StoredVerdict.id)).where(StoredVerdict.status == "ready")).scalar_one()


@pytest.mark.parametrize("factor", [100, 190])
async def test_concurrent_duels_on_partly_stored_answers_never_overrun_the_budget(api, factor):
    svc = api.app.state.campaigns.cycle
    tag = reserve_tag()
    prompts = [f"partly stored {n}" for n in range(6)]
    budget = 1.0
    body = {
        "name": "partly stored",
        "models": [reserve_model(tag, n) for n in "abc"],
        "prompts": prompts,
        "judge": {"kind": "human"},
        "budget": budget,
        "seed": 5,
    }
    with respx.mock(assert_all_called=False) as mock:
        mock.post(RESERVE_URL).mock(side_effect=reserve_reply(factor))
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        _store_answers(svc, cid, prompts[:3])  # half the prompts answered by every model
        _store_answers(svc, cid, prompts[3:], models=[0])
        for _ in range(4):  # concurrent rounds; the votes free the pairs
            rs = await asyncio.gather(*[api.post(f"/v1/campaigns/{cid}/duels") for _ in range(20)])
            codes = {x.status_code for x in rs}
            assert codes <= {201, 409, 410}, [x.text for x in rs if x.status_code not in (201, 409, 410)]
            for x in rs:
                if x.status_code == 201:
                    await api.post(f"/v1/duels/{x.json()['id']}/vote", json={"choice": "tie"})
            c = (await api.get(f"/v1/campaigns/{cid}")).json()
            assert c["spend"] <= budget + 1e-9, c
            if c["status"] != "running":
                break
    assert c["spend"] <= budget + 1e-9 and c["duels_created"] > 0, c
    assert to_nusd(c["spend"]) == _ledger(svc, cid)


# ---------------------------------------------------------------- pre-generation with a budget


async def test_pre_generation_with_a_budget_holds_each_call_and_annotators_use_its_answers(api, monkeypatch):
    from service.campaigns.pregeneration import PREGEN_DUELS, planned_prompts

    svc = api.app.state.campaigns.cycle
    pregen = api.app.state.campaigns.pregen
    monkeypatch.setattr(draws, "new_draw_key", lambda: "7a" * 32)
    tag = reserve_tag()
    prompts = [f"pregen budget question {n}" for n in range(8)]
    bound = model_bound_nusd(reserve_model(tag, "a"), prompts[0])
    budget = 2.0
    seen_holds: list[int] = []

    def reply(request: httpx.Request) -> httpx.Response:
        with svc.db.read() as s:  # during the call: the holds of the pre-generation calls in flight
            seen_holds.append(
                int(
                    s.execute(
                        select(func.coalesce(func.sum(BudgetHold.amount_nusd), 0)).where(
                            BudgetHold.campaign_id == cid_box[0]
                        )
                    ).scalar_one()
                )
            )
        return reserve_reply(100)(request)

    cid_box = [0]
    with respx.mock(assert_all_called=False) as mock:
        mock.post(RESERVE_URL).mock(side_effect=reply)
        cid = (await api.post("/v1/campaigns", json=reserve_human_body(tag, prompts, budget))).json()["id"]
        cid_box[0] = cid
        token = (await api.post(f"/v1/campaigns/{cid}/annotators", json={"label": "pre"})).json()["token"]
        who = {"Authorization": f"Bearer {token}"}
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
        assert r.status_code == 201, r.text
        first = r.json()
        wanted = set(planned_prompts(6, 1, len(prompts), PREGEN_DUELS, draw_key="7a" * 32))
        for _ in range(400):  # the background pre-generation of the next duels' answers
            if not pregen.busy:
                break
            await asyncio.sleep(0.05)
        assert not pregen.busy
        assert _holds(svc, cid) == 0  # every hold was released with its charge
        with svc.db.read() as s:
            pre = s.execute(
                select(func.count(Charge.id)).where(Charge.campaign_id == cid, Charge.duel_id.is_(None))
            ).scalar_one()
        assert pre > 0 and max(seen_holds) >= bound  # calls were made, each under a hold
        c = (await api.get(f"/v1/campaigns/{cid}")).json()
        assert c["spend"] <= budget
        assert (await api.post(f"/v1/duels/{first['id']}/vote", headers=who, json={"choice": "a"})).status_code == 200
        r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
        assert r.status_code == 201, r.text
        second = (await api.get(f"/v1/duels/{r.json()['id']}")).json()
        # its prompt is the first one pre-generated: both answers came from the store, and it reserved nothing
        assert second["prompt"] in {prompts[i] for i in wanted}
        model_charges = [ch for ch in second["charges"] if ch["kind"] == "model"]
        assert len(model_charges) == 2 and all(ch["reused"] and ch["amount"] == 0 for ch in model_charges), second
        assert _reservations(svc, cid)[-1] == 0
        # annotators vote until the budget ends the campaign; the spend never passes it
        for _ in range(60):
            await api.post(f"/v1/duels/{r.json()['id']}/vote", headers=who, json={"choice": "b"})
            r = await api.post(f"/v1/campaigns/{cid}/duels", headers=who)
            c = (await api.get(f"/v1/campaigns/{cid}")).json()
            assert c["spend"] <= budget + 1e-9, c
            if r.status_code != 201:
                break
        for _ in range(400):
            if not pregen.busy:
                break
            await asyncio.sleep(0.05)
    c = (await api.get(f"/v1/campaigns/{cid}")).json()
    assert c["spend"] <= budget + 1e-9, c
    assert to_nusd(c["spend"]) == _ledger(svc, cid)
    assert _holds(svc, cid) == 0
    assert (await api.get(f"/v1/campaigns/{cid}/replay")).json()["ok"]


async def test_a_pre_generation_hold_is_released_on_failure_and_on_success(api):
    svc = api.app.state.campaigns.cycle
    pregen = api.app.state.campaigns.pregen
    tag = reserve_tag()
    prompts = [f"hold question {n}" for n in range(3)]
    started = utcnow() - dt.timedelta(seconds=1)
    cid = (await api.post("/v1/campaigns", json=reserve_human_body(tag, prompts, 5.0))).json()["id"]
    with respx.mock(assert_all_called=False) as mock:
        mock.post(RESERVE_URL).mock(return_value=httpx.Response(500, json={"error": "down"}))
        assert await pregen.pregenerate(cid) == -1
    assert _holds(svc, cid) == 0 and _ledger(svc, cid) == 0
    with svc.db.read() as s:  # the failed call's claim was released too (this test's claims: other tests
        # of the session share the database and may leave a claim for a take-over to find)
        mine = (
            StoredAnswer.prompt_hash.in_([store_keys.prompt_hash(p) for p in prompts]),
            StoredAnswer.created_at >= started,
        )
        assert not s.execute(
            select(StoredAnswer.id).where(StoredAnswer.status == store_claims.GENERATING, *mine)
        ).first()
    with respx.mock(assert_all_called=False) as mock:
        calls = mock.post(RESERVE_URL).mock(side_effect=reserve_reply(100))
        paid = await pregen.pregenerate(cid)
    assert paid == calls.call_count > 0
    with svc.db.read() as s:  # the filter above sees this test's answers (it is not vacuous)
        assert s.execute(select(func.count(StoredAnswer.id)).where(*mine)).scalar_one() >= paid
    assert _holds(svc, cid) == 0
    assert _ledger(svc, cid) == to_nusd(_campaign(svc, cid).spend_nusd / 1e9)
    assert _ledger(svc, cid) <= paid * model_bound_nusd(reserve_model(tag, "a"), prompts[0])


async def test_pre_generation_stops_when_a_bound_does_not_fit_and_a_dead_hold_lapses(api):
    svc = api.app.state.campaigns.cycle
    pregen = api.app.state.campaigns.pregen
    tag = reserve_tag()
    prompts = [f"tight question {n}" for n in range(3)]
    bound = model_bound_nusd(reserve_model(tag, "a"), prompts[0])
    cid = (await api.post("/v1/campaigns", json=reserve_human_body(tag, prompts, 0.9 * bound / 1e9))).json()["id"]
    with respx.mock(assert_all_called=False) as mock:
        calls = mock.post(RESERVE_URL).mock(side_effect=reserve_reply(100))
        assert await pregen.pregenerate(cid) == -1  # no room: pre-generation pauses for the campaign
        assert calls.call_count == 0  # not one call: its bound does not fit
    # a hold left by a process that died: counted until it expires, then ignored
    cid = (await api.post("/v1/campaigns", json=reserve_human_body(tag + "x", prompts, 3.5 * bound / 1e9))).json()["id"]
    now = utcnow()
    with svc.db.write() as s:
        s.add(
            BudgetHold(
                campaign_id=cid,
                amount_nusd=3 * bound,
                purpose="pregeneration",
                created_at=now,
                expires_at=now + dt.timedelta(minutes=5),
            )
        )
    with respx.mock(assert_all_called=False) as mock:
        calls = mock.post(RESERVE_URL).mock(side_effect=reserve_reply(100))
        assert await pregen.pregenerate(cid) == -1 and calls.call_count == 0
        r = await api.post(f"/v1/campaigns/{cid}/duels")
        assert r.status_code == 409 and "pre-generated" in r.text, r.text  # held: retry later, not ended
        with svc.db.write() as s:  # the dead process's hold expires
            s.execute(
                BudgetHold.__table__.update()
                .where(BudgetHold.campaign_id == cid)
                .values(expires_at=now - dt.timedelta(seconds=1))
            )
        assert await pregen.pregenerate(cid) > 0
    assert _holds(svc, cid) == 0  # the expired hold was cleared on the way
    assert _ledger(svc, cid) <= 3.5 * bound


async def test_two_services_pre_generating_on_one_database_never_overrun_the_budget(api, db_url):
    """Two processes' worth of services (separate caches and single-flight maps) pre-generate the
    same campaign at once; the holds, taken under the campaign's row lock, keep the budget."""
    svc = api.app.state.campaigns.cycle
    pregen = api.app.state.campaigns.pregen
    tag = reserve_tag()
    prompts = [f"two services question {n}" for n in range(12)]
    bound = model_bound_nusd(reserve_model(tag, "a"), prompts[0])
    budget_nusd = 5 * bound + bound // 2  # room for five calls' bounds
    body = reserve_human_body(tag, prompts, budget_nusd / 1e9)
    body["answers"] = "reuse"
    in_flight, most = [0], [0]

    async def slow(request: httpx.Request) -> httpx.Response:
        in_flight[0] += 1
        most[0] = max(most[0], in_flight[0])
        await asyncio.sleep(0.2)
        in_flight[0] -= 1
        return reserve_reply(190)(request)  # each call costs close to its bound

    async with app_client(db_url) as other_api:
        other = other_api.app.state.campaigns.pregen
        cid = (await api.post("/v1/campaigns", json=body)).json()["id"]
        with respx.mock(assert_all_called=False) as mock:
            calls = mock.post(RESERVE_URL).mock(side_effect=slow)
            paid = 0
            for _ in range(3):
                got = await asyncio.gather(pregen.pregenerate(cid), other.pregenerate(cid))
                assert min(got) >= -1  # -1: no call's bound fit (nothing paid), never a failure here
                paid += sum(max(g, 0) for g in got)
            assert calls.call_count == paid  # every call made was paid and stored: none failed
        assert most[0] >= 2  # the two services' calls overlapped
        spend = _campaign(svc, cid).spend_nusd
        assert spend <= budget_nusd and spend == _ledger(svc, cid)
        assert 0 < calls.call_count <= 5
        assert _holds(svc, cid) == 0


async def test_a_recovered_pre_generated_answer_replaces_the_hold_of_its_key(api):
    """A pre-generation batch adopted after its process died (service/cycle/pregen_recovery.py) is charged
    without the hold's id, which only the dead process knew: the charge releases the hold of the answer's
    key, as the sending process's charge releases its own, instead of the budget counting both until the hold
    lapses (a duel or a pre-generated call refused for room the batch's answer already paid for)."""
    from service.clients import Completion
    from service.money import holds

    svc = api.app.state.campaigns.cycle
    pregen = api.app.state.campaigns.pregen
    tag = reserve_tag()
    prompt = "recovered question"
    bound = model_bound_nusd(reserve_model(tag, "a"), prompt)
    cid = (await api.post("/v1/campaigns", json=reserve_human_body(tag, [prompt], 5.0))).json()["id"]
    key, other = uuid.uuid4().hex, uuid.uuid4().hex
    now = utcnow()
    with svc.db.write() as s:  # the dead process's holds: this answer's, and another call's still out
        for k in (key, other):
            holds.take_hold(
                s, cid, amount_nusd=bound, now=now, expires_at=now + dt.timedelta(minutes=5), model_index=0, key=k
            )
    answer = Completion("a recovered answer", 10, 5, 0.005, 0.0, 1)
    pregen.store_pregenerated_tx(cid, 0, store_claims.Claim("answer", -1, key), answer, prompt=prompt, hold_key=key)
    assert _ledger(svc, cid) == to_nusd(0.005)
    assert _holds(svc, cid) == 1  # the answer's hold went with its charge; the other call's stays
    with svc.db.read() as s:
        assert s.execute(select(BudgetHold.key).where(BudgetHold.campaign_id == cid)).scalar_one() == other
