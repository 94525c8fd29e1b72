"""The hybrid judge in the service: validation, the cycle (automatic verdict, keyed human coin,
votes on the pool), the ledger (the human fee reserved, charged only with a vote) and replay."""

from __future__ import annotations

import pytest
from service_helpers import SYNTHETIC_P, campaign_body, simulated_judge

FEE = 0.05


def hybrid_judge(rate=0.5, fee=FEE, llm=None) -> dict:
    return {
        "kind": "hybrid",
        "llm": llm if llm is not None else simulated_judge(SYNTHETIC_P),
        "human": {"fee_per_vote": fee},
        "human_rate": rate,
    }


@pytest.mark.parametrize(
    "judge, extra, needle",
    [
        (hybrid_judge(llm={"kind": "human"}), {}, "must be an automatic judge"),
        (hybrid_judge(llm={"kind": "hybrid", "llm": simulated_judge()}), {}, "must be an automatic judge"),
        (hybrid_judge(rate=0), {}, "human_rate"),
        (hybrid_judge(rate=1.5), {}, "human_rate"),
        (hybrid_judge(rate="sometimes"), {}, "human_rate"),
        (hybrid_judge(rate=True), {}, "human_rate"),
        (hybrid_judge(fee=-1), {}, "fee_per_vote"),
        (hybrid_judge(fee=2e6), {}, "fee_per_vote"),
        (hybrid_judge(), {"algorithm": "dctas"}, "needs algorithm dctas-pc"),
        (hybrid_judge(), {"prompt_sampling": "without_replacement"}, "without_replacement"),
        (hybrid_judge(), {"tie_policy": "drop"}, "tie_policy half or random"),
    ],
)
async def test_bad_hybrid_campaigns_are_422_with_a_reason(api, judge, extra, needle):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=judge, **extra))
    assert r.status_code == 422, r.text
    assert needle in r.text


async def test_a_hybrid_campaign_runs_as_dctas_pc_hybrid(api):
    r = await api.post("/v1/campaigns", json=campaign_body(judge=hybrid_judge(rate="active")))
    assert r.status_code == 201, r.text
    view = r.json()
    assert view["algorithm"] == "dctas-pc-hybrid"
    assert view["tie_policy"] == "half" and view["prompt_sampling"] == "with_replacement"
    assert view["judge"]["human_rate"] == "active" and view["judge"]["human"]["fee_per_vote"] == FEE
