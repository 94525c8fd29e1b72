"""The offline demo campaign of ``llmduel serve --demo``.

Three simulated models on the paper's synthetic instance (Section 5.1): costs
(4, 1, 1) in the paper's units, preference matrix with model 1 the Condorcet
winner, a simulated judge drawing from it, delta = 0.01 as in the paper. Runs in
the background; progress goes to stderr.
"""

from __future__ import annotations

import asyncio
import sys
import time

from algorithms.instance import SYNTHETIC_PREFERENCE
from algorithms.vocabulary import CampaignStatus, TiePolicy

from .campaigns.tasks import in_thread
from .campaigns.verdicts import evidence_line
from .campaigns.views import Views
from .container import Campaigns
from .schemas import CampaignCreate

SYNTHETIC_P = SYNTHETIC_PREFERENCE.tolist()

DEMO_PROMPTS = [
    "Explain why the sky is blue in two sentences.",
    "Write a haiku about pairwise comparisons.",
    "What is the difference between a list and a tuple in Python?",
    "Summarise the idea of a Condorcet winner for a newcomer.",
    "Give three tips for writing a clear commit message.",
]


def demo_campaign() -> CampaignCreate:
    return CampaignCreate(
        name="demo: paper synthetic instance, costs (4, 1, 1)",
        delta=0.01,
        algorithm="dctas-pc",
        models=[
            {"name": "model-1 (best, cost 4)", "cost": 4.0, "client": {"kind": "simulated"}},
            {"name": "model-2 (cost 1)", "cost": 1.0, "client": {"kind": "simulated"}},
            {"name": "model-3 (cost 1)", "cost": 1.0, "client": {"kind": "simulated"}},
        ],
        prompts=DEMO_PROMPTS,
        judge={"kind": "simulated", "preference": SYNTHETIC_P},
        tie_policy=TiePolicy.DROP,
        seed=2024,
    )


def _say(msg: str) -> None:
    print(f"llmduel demo: {msg}", file=sys.stderr, flush=True)


async def start_demo(campaigns: Campaigns, base_url: str | None, interval: float = 2.0) -> int:
    """Create the demo campaign, start its run, and log progress until it ends."""
    campaign_id = await in_thread(campaigns.lifecycle.create_campaign, demo_campaign())
    base = (base_url or "http://127.0.0.1:8000").rstrip("/")
    _say(
        f"campaign {campaign_id} created: dashboard {base}/campaigns/{campaign_id} , "
        f"API {base}/v1/campaigns/{campaign_id} (admin key required), docs {base}/docs"
    )
    await campaigns.runs.start_run(campaign_id, None, 1)
    campaigns.background.spawn(_progress(campaigns.views, campaign_id, interval))
    return campaign_id


async def _progress(views: Views, campaign_id: int, interval: float) -> None:
    start = time.monotonic()
    while True:
        await asyncio.sleep(interval)
        try:
            view = await in_thread(views.get_campaign, campaign_id)
        except Exception as exc:  # keep the demo alive through transient DB errors
            _say(f"cannot read progress ({type(exc).__name__})")
            continue
        line = (
            f"campaign {campaign_id}: {view['status']}, {view['duels']} duels, spend {view['spend']:.0f} cost units, "
            f"leader {view['leader']}, {evidence_line(view)}"
        )
        if view["status"] != CampaignStatus.RUNNING:
            _say(line)
            if view["winner"] is not None:
                _say(
                    f"certified winner: {view['winner']} after {view['duels']} duels and spend "
                    f"{view['spend']:.0f} cost units ({time.monotonic() - start:.0f} s); "
                    "the service keeps running (Ctrl-C to quit)"
                )
            return
        _say(line)
