"""A campaign's results as files people can read and take away (``GET /v1/campaigns/{id}/export``).

* ``certificate.json``: the verdict (winner, or why there is none), the models disabled while it ran, delta, algorithm,
  spend, duels, when and why the campaign ended;
* ``battles.jsonl``: the judged duels as a FastChat / LMArena battle log
  (``model_a``, ``model_b``, ``winner`` in ``model_a | model_b | tie | tie (bothbad)``,
  ``question_id``, ``category``, ``judge``, ``turn`` (the number of user turns of the
  prompt, as FastChat counts them), ``anony``, ``tstamp``) plus
  llmduel's own fields (``campaign_id``, ``duel_id``, ``number``, ``counted``,
  ``score``, ``cost``; for a human vote ``annotator``, the annotator's label beside its
  stable id in ``judge``, and ``comment`` when the annotator left one with the vote);
  ``llmduel analyze battles.jsonl`` reads it back;
* ``matrix.csv``: **choice**: one row per ordered pair (``model``, ``opponent``,
  ``wins``, ``losses``, ``ties``, ``duels``, ``win_rate`` with ties as halves), every
  judged duel whatever the tie policy; a long table reads in any spreadsheet and
  keeps the counts next to the rates;
* ``ranking.csv`` and ``ranking.json``: per model, the win rate against the field from
  the counted duels' scores as the certificate counts them (graded scores, ties by the
  tie policy), its 95% anytime-valid interval (``ci_low``, ``ci_high``: it holds at the
  campaign's own stopping time, for every model at once: betting confidence sequences) and the seeded bootstrap interval (``bootstrap_low``,
  ``bootstrap_high``: descriptive only) (:mod:`algorithms.ranking`), its counted duels,
  the configured cost per query, the observed cost per query (its model charges over
  its answered calls) and its observed spend;
* ``ranking_by_category.csv``: the same win rates and anytime-valid intervals per
  prompt category (``category``, ``rank``, ``model``, ``win_rate``, ``ci_low``,
  ``ci_high``, ``duels``); prompts without a category form the category ``(none)``.
* ``judgments.jsonl`` and ``model_answer/<model>.jsonl``: the audit trail, every judge call
  and every answer behind the verdicts (:mod:`.audit_files`);
* ``ranking_style.json``: the ranking with the answers' style held fixed beside the raw one
  (:mod:`.style`);
* ``judge_bias.json``: how often the judge picked the first position, how often its two
  orders disagreed, how often the longer answer won, each with a 95% Wilson interval, and
  the warnings past their limits (:mod:`service.campaigns.judge_bias`).

CSV cells that a spreadsheet would read as a formula (starting with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return) are prefixed with ``'`` (:func:`algorithms.csv_cells.csv_cell`).

**choice**: the export is one JSON object ``{"campaign_id", "files": {name: text}}``
(not a zip): it reads with curl and jq, and ``llmduel campaign export`` writes each
file as is.
"""

from __future__ import annotations

import base64
import io
import json
import re
from collections.abc import Iterator, Sequence
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Text, case, cast, func, literal, literal_column, select

from algorithms.csv_cells import write_csv
from algorithms.ranking import Ranking, bootstrap_ranking
from algorithms.vocabulary import CampaignStatus, Choice, DuelStatus

from ..db import Database
from ..models import Campaign, Duel, Prompt, StoredImage, from_nusd
from . import policy_log
from .audit_files import answer_files, iter_judgment_lines
from .export_stream import (
    LogMeta,
    answer_rows,
    json_file,
    judge_calls,
    judged_duels,
    lines_in_pages,
    style_duels,
    window_start,
)
from .judge_bias import BiasTally, judge_bias
from .style import StyleRows
from .types import NotFound
from .verdicts import verdict_sentence, verdict_text
from .views import Views

#: An image's name in a prompt's or an answer's text (service/prompts.py, service/clients/images.py).
IMAGE_NAME = re.compile(r"\[image sha256:([0-9a-f]{64})\]")
IMAGE_TAG = "[image sha256:"

FASTCHAT_WINNER = {Choice.A: "model_a", Choice.B: "model_b", Choice.TIE: "tie", Choice.BOTH_BAD: "tie (bothbad)"}
BOOTSTRAP_REPS = 1000
#: The ranking's interval shown as ci_low/ci_high (algorithms.ranking): valid at the campaign's stopping time,
#: simultaneously for every model.
INTERVAL = "betting"
INTERVAL_LEVEL = 0.95
NO_CATEGORY = "(none)"
MATRIX_COLUMNS = ["model", "opponent", "wins", "losses", "ties", "duels", "win_rate"]
RANKING_BY_CATEGORY_COLUMNS = ["category", "rank", "model", "win_rate", "ci_low", "ci_high", "duels"]
# While a campaign runs the dashboard redraws its ranking at every change: fewer resamples
# (the ended campaign's table has BOOTSTRAP_REPS, the same numbers as the export's).
RUNNING_REPS = 250
RANKING_CACHE = 64
#: judges whose bias report is counted from one grouped read of the log (their detail says no more than
#: whether a verdict was reused); an LLM judge's, a jury's and a hybrid judge's are read duel by duel
GROUPED_BIAS_JUDGES = ("simulated", "human")


class Results:
    """Reads a campaign's log once and derives the exported files and the dashboard's ranking.

    Owns its caches of rankings and judge-bias reports (keyed by the campaign's event sequence)."""

    def __init__(self, db: Database, views: Views):
        self.db = db
        self.views = views
        # (campaign id, window) -> (counted duels, style view): the last fit of each (:meth:`style`)
        self._style_last: dict[tuple[int, int | None], tuple[int, dict[str, Any]]] = {}

    def _ranking_data(self, s, c: Campaign) -> dict[str, Any]:
        """Aggregates for the ranking: counted scores by (model i, model j, score of i), spend and calls per model."""
        cid = c.id
        counted = (Duel.campaign_id == cid, Duel.status == DuelStatus.JUDGED, Duel.counted, Duel.score.is_not(None))
        # one category for every prompt (none, most often): the log grouped without the prompts' join
        cats = s.execute(select(Prompt.category).where(Prompt.campaign_id == cid).distinct().limit(2)).scalars().all()
        if len(cats) <= 1:
            one = literal(cats[0] if cats else None, Prompt.category.type).label("category")
            grouped = select(one, Duel.model_i, Duel.model_j, Duel.score, func.count(Duel.id)).where(*counted)
            by_category = s.execute(grouped.group_by(Duel.model_i, Duel.model_j, Duel.score)).all()
        else:
            by_category = s.execute(
                select(Prompt.category, Duel.model_i, Duel.model_j, Duel.score, func.count(Duel.id))
                .join(
                    Prompt, (Prompt.campaign_id == Duel.campaign_id) & (Prompt.idx == Duel.prompt_index), isouter=True
                )
                .where(*counted)
                .group_by(Prompt.category, Duel.model_i, Duel.model_j, Duel.score)
            ).all()
        # paid calls and their total per model, by the rule of the campaign view's observed cost
        # (Views.observed_costs: a zero-cost reuse of a stored answer is no call)
        observed = self.views.observed_costs(s, cid)
        spend = {m: total for m, (_, total) in observed.items()}
        calls = {m: n for m, (n, _) in observed.items()}
        # the whole campaign's outcomes are the categories' summed (one read of the log, not two)
        total: dict[tuple[int, int, float], int] = {}
        categories: dict[str, list[tuple[int, int, float, int]]] = {}
        for cat, i, j, score, n in by_category:
            categories.setdefault(cat if cat else NO_CATEGORY, []).append((int(i), int(j), float(score), int(n)))
            total[int(i), int(j), float(score)] = total.get((int(i), int(j), float(score)), 0) + int(n)
        rows = [(i, j, score, n) for (i, j, score), n in sorted(total.items())]
        return {"outcomes": rows, "categories": categories, "spend": spend, "calls": calls}

    def _results_data(self, campaign_id: int) -> dict[str, Any]:
        """The ranking's aggregates, the campaign's view and version (the log itself is read in pages:
        :mod:`.export_stream`), read once per change of the campaign (its ``version``)."""
        cache = self.__dict__.setdefault("_data_cache", {})
        with self.db.read() as s:
            version = s.execute(select(Campaign.version).where(Campaign.id == campaign_id)).scalar_one_or_none()
            if version is None:
                raise NotFound(f"campaign {campaign_id} not found")
            hit = cache.get(campaign_id)
            if hit is not None and hit["version"] == int(version):
                return hit
            if not self.db.is_sqlite:  # the row and the ledger from one snapshot
                s.rollback()
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            c = policy_log.get_light(s, campaign_id)
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            data = self._ranking_data(s, c)
            data["view"] = self.views.campaign_view(c, 0, clock=self.db.clock(s))
            data["version"] = int(c.version)
        if len(cache) >= RANKING_CACHE:
            cache.clear()
        cache[campaign_id] = data
        return data

    # ------------------------------------------------------------ pieces
    @staticmethod
    def _ranking(data: dict[str, Any], seed: int, reps: int = BOOTSTRAP_REPS) -> list[dict[str, Any]]:
        view = data["view"]
        names = [m["name"] for m in view["models"]]
        r = _betting(data)
        boot = _rank(data["outcomes"], len(names), "bootstrap", reps=reps, seed=seed) if reps else None
        out = []
        for rank, m in enumerate(r.order, 1):
            spend = from_nusd(int(data["spend"].get(m) or 0)) or 0.0
            calls = int(data["calls"].get(m, 0))
            out.append(
                {
                    "rank": rank,
                    "model": names[m],
                    "win_rate": _num(r.win_rate[m]),
                    "ci_low": _num(r.low[m]),
                    "ci_high": _num(r.high[m]),
                    "bootstrap_low": _num(boot.low[m]) if boot else None,
                    "bootstrap_high": _num(boot.high[m]) if boot else None,
                    "duels": int(r.duels[m]),
                    "cost_per_query": view["models"][m]["cost"],
                    "observed_cost_per_query": round(spend / calls, 9) if calls else None,
                    "calls": calls,
                    "spend": round(spend, 9),
                }
            )
        return out

    @staticmethod
    def _ranking_by_category(data: dict[str, Any]) -> list[dict[str, Any]]:
        """Per category (sorted by name, ``(none)`` last): the ranking rows with anytime-valid intervals."""
        names = [m["name"] for m in data["view"]["models"]]
        out = []
        for cat in sorted(data["categories"], key=lambda x: (x == NO_CATEGORY, x)):
            # one category: its duels are the campaign's, its intervals the ranking's (computed once)
            r = _betting(data) if len(data["categories"]) == 1 else _rank(data["categories"][cat], len(names), INTERVAL)
            rows = [
                {
                    "category": cat,
                    "rank": rank,
                    "model": names[m],
                    "win_rate": _num(r.win_rate[m]),
                    "ci_low": _num(r.low[m]),
                    "ci_high": _num(r.high[m]),
                    "duels": int(r.duels[m]),
                }
                for rank, m in enumerate(r.order, 1)
            ]
            out.append({"category": cat, "duels": sum(o[3] for o in data["categories"][cat]), "rows": rows})
        return out

    @staticmethod
    def _matrix_rows(names: list[str], wins: list[list[int]], ties: list[list[int]]) -> list[dict[str, Any]]:
        """``matrix.csv``'s rows from the judged duels' counts (``wins[a][b]``: a beat b; ``ties`` symmetric)."""
        rows = []
        L = len(names)
        for i in range(L):
            for j in range(L):
                n = wins[i][j] + wins[j][i] + ties[i][j]
                if i == j:
                    continue
                rows.append(
                    {
                        "model": names[i],
                        "opponent": names[j],
                        "wins": wins[i][j],
                        "losses": wins[j][i],
                        "ties": ties[i][j],
                        "duels": n,
                        "win_rate": round((wins[i][j] + 0.5 * ties[i][j]) / n, 4) if n else "",
                    }
                )
        return rows

    @staticmethod
    def _battle(names: list[str], campaign_id: int, d: dict[str, Any]) -> dict[str, Any] | None:
        """The duel's line of ``battles.jsonl`` (None: no verdict the battle log names)."""
        if d["choice"] not in FASTCHAT_WINNER:
            return None
        qid, category = d["meta"]
        score_a = None
        if d["score"] is not None:
            score_a = d["score"] if d["a"] == d["model_i"] else 1.0 - d["score"]
        out = {
            "question_id": qid,
            "category": category,
            "model_a": names[d["a"]],
            "model_b": names[d["b"]],
            "winner": FASTCHAT_WINNER[d["choice"]],
            "judge": d["judged_by"],
            "turn": d["turn"],
            "anony": True,
            "tstamp": d["tstamp"],
            "campaign_id": campaign_id,
            "duel_id": d["id"],
            "number": d["number"],
            "counted": d["counted"],
            "score_a": score_a,
            "cost": d["cost"],
        }
        for side in ("a", "b"):  # an image answer: named by the sha256 of its file (export's images/)
            text = d.get(f"answer_{side}")
            m = IMAGE_NAME.fullmatch(text) if isinstance(text, str) and text.startswith(IMAGE_TAG) else None
            if m is not None:
                out[f"image_{side}"] = m.group(1)
        if d.get("annotator"):  # the annotator's label beside its stable id in ``judge``
            out["annotator"] = d["annotator"]
        if d.get("comment"):
            out["comment"] = d["comment"]
        return out

    @staticmethod
    def _certificate(data: dict[str, Any]) -> dict[str, Any]:
        v = data["view"]
        names = [m["name"] for m in v["models"]]
        ended = v["ended_at"]
        return {
            "campaign_id": v["id"],
            "name": v["name"],
            "status": v["status"],
            "verdict": verdict_sentence(v["status"], v.get("verdict") or "")
            or verdict_text(v["status"], v["winner"], v["leader"], v["delta"], end_reason=v["end_reason"]),
            "certificate_graph": v.get("certificate_graph") or [],
            "not_beaten": v.get("not_beaten") or [],
            "exact_ties": v.get("exact_ties") or [],
            "top_cycle_certified": v.get("top_cycle_certified") or [],
            "cheapest": v.get("cheapest"),
            "cost_unit": v.get("cost_unit") or "USD",
            "winner": v["winner"],
            "leader": v["leader"],
            "delta": v["delta"],
            "confidence": 1.0 - v["delta"],
            "algorithm": v["algorithm"],
            "assumes_condorcet_winner": v["assumes_condorcet_winner"],
            "certified_pairs": [[names[w], names[x]] for w, x in (v["certificates"] or [])],
            # models disabled or replaced while it ran: the verdict is about the others (docs/guide.md)
            "disabled_models": [m["name"] for m in v["models"] if m.get("status", "active") != "active"],
            "model_changes": v.get("model_changes") or [],
            "tie_policy": v["tie_policy"],
            "prompt_sampling": v.get("prompt_sampling"),
            "population": v.get("population"),
            "exact_preferences": [
                {"model": names[int(i)], "opponent": names[int(j)], "preference": p}
                for i, j, p in (v.get("exact") or [])
            ],
            "spend": v["spend"],
            "judge_spend": v["judge_spend"],
            "budget": v["budget"],
            "duels": v["duels"],
            "duels_counted": v["duels_counted"],
            "duels_failed": v["duels_failed"],
            "max_duels": v["max_duels"],
            "end_reason": v["end_reason"],
            "ended_at": ended.isoformat() if ended is not None else None,
            "models": [
                {"name": m["name"], "cost_per_query": m["cost"], "cost_source": m.get("cost_source")}
                for m in v["models"]
            ],
            "seed": v["seed"],
        }

    def _once(self, name: str, campaign_id: int, data: dict[str, Any], compute: Any) -> Any:
        """``compute()`` once per campaign version (the cache ``name``, at most RANKING_CACHE entries)."""
        cache = self.__dict__.setdefault(f"_{name}_cache", {})
        key = (campaign_id, data["version"])
        if key not in cache:
            if len(cache) >= RANKING_CACHE:
                cache.clear()
            cache[key] = compute()
        return cache[key]

    # ------------------------------------------------------------ public
    def ranking(self, campaign_id: int, bootstrap: bool = True) -> list[dict[str, Any]]:
        """The ranking table (win rate against the field with its betting and bootstrap intervals, costs,
        spend); ``bootstrap=False`` (the dashboard, which does not show it): ``bootstrap_low`` and
        ``bootstrap_high`` None, without the resampling (the slow part with a long log)."""
        data = self._results_data(campaign_id)
        running = data["view"]["status"] == CampaignStatus.RUNNING
        reps = (RUNNING_REPS if running else BOOTSTRAP_REPS) if bootstrap else 0
        seed = int(data["view"]["seed"]) % 2**32
        name = "ranking" if bootstrap else "ranking_shown"
        return self._once(name, campaign_id, data, lambda: self._ranking(data, seed, reps))

    def style(self, campaign_id: int, settled: bool = False, last: int | None = None) -> dict[str, Any]:
        """The ranking with style held fixed, beside the raw one (:mod:`.style`), once per change.

        ``settled`` (the dashboard): while the campaign runs, the last fit stands until the counted
        duels grew by a tenth (the fit reads every duel of its window, their stored answer features), so a
        live page does not refit at every vote; its ``duels`` says how many it was fitted on. ``last``: on the last
        ``last`` judged duels only (the dashboard's window)."""
        data = self._results_data(campaign_id)
        last_fit = self._style_last.get((campaign_id, last))
        view = data["view"]
        if settled and last_fit is not None and view["status"] == CampaignStatus.RUNNING:
            if int(view.get("duels_counted") or 0) < 1.1 * last_fit[0]:
                return last_fit[1]

        def fit() -> dict[str, Any]:
            rows = StyleRows()
            with self.db.read() as s:
                after = window_start(s, campaign_id, last)
                for d in style_duels(s, campaign_id, after=after):
                    rows.add(d)
            return {"campaign_id": campaign_id, **rows.report([m["name"] for m in view["models"]])}

        out = self._once("style" if last is None else f"style_last_{last}", campaign_id, data, fit)
        if len(self._style_last) >= RANKING_CACHE:
            self._style_last.clear()
        self._style_last[campaign_id, last] = (max(1, int(view.get("duels_counted") or 0)), out)
        return out

    def ranking_by_category(self, campaign_id: int) -> list[dict[str, Any]]:
        """Per prompt category, the ranking with anytime-valid intervals (``[]``: no counted duel)."""
        data = self._results_data(campaign_id)
        return self._once("category", campaign_id, data, lambda: self._ranking_by_category(data))

    def ranking_page(
        self,
        campaign_id: int,
        category: str | None = None,
        *,
        offset: int = 0,
        limit: int = 100,
        bootstrap: bool = False,
    ) -> dict[str, Any]:
        """``GET /v1/campaigns/{id}/ranking``: rows ``offset`` to ``offset + limit`` of the ranking (with its
        bootstrap interval when ``bootstrap``) or of one category's, and every category with its duels."""
        cats = self.ranking_by_category(campaign_id)
        if category is None:
            rows = self.ranking(campaign_id, bootstrap=bootstrap)
        else:
            found = [c for c in cats if c["category"] == category]
            if not found:
                raise NotFound(f"campaign {campaign_id} has no counted duel in category {category!r}")
            rows = found[0]["rows"]
        return {
            "campaign_id": campaign_id,
            "category": category,
            "categories": [{"category": c["category"], "duels": c["duels"]} for c in cats],
            "total": len(rows),
            "offset": offset,
            "limit": limit,
            "rows": rows[offset : offset + limit],
        }

    def judge_bias(self, campaign_id: int, last: int | None = None) -> dict[str, Any]:
        """The judge's bias report (:mod:`service.campaigns.judge_bias`) from the campaign's judged duels (the
        last ``last`` of them when given: the dashboard's window, said by ``window``)."""
        with self.db.read() as s:
            # the columns it needs (the row's policy state is a large JSON at many models)
            c = s.execute(
                select(Campaign.version, Campaign.judge, Campaign.models).where(Campaign.id == campaign_id)
            ).one_or_none()
            if c is None:
                raise NotFound(f"campaign {campaign_id} not found")
            key = (campaign_id, int(c.version), last)
            cache = self.__dict__.setdefault("_bias_cache", {})
            if key in cache:  # the dashboard asks at every refresh: read the log again only when it changed
                return cache[key]
            after = window_start(s, campaign_id, last)
            judge, models = dict(c.judge or {}), list(c.models or [])
            images = any(m.get("output") == "image" for m in models)
            if judge.get("kind") in GROUPED_BIAS_JUDGES and not images:
                out = {"campaign_id": campaign_id, **_grouped_bias(s, campaign_id, after, BiasTally(judge, models))}
                return self._keep_bias(cache, key, out, last)
            rows = s.execute(
                select(
                    Duel.choice,
                    case((Duel.a_is_i, Duel.model_i), else_=Duel.model_j).label("model_a"),
                    case((Duel.a_is_i, Duel.model_j), else_=Duel.model_i).label("model_b"),
                    Duel.judge_detail,
                    func.length(Duel.answer_a).label("len_a"),
                    func.length(Duel.answer_b).label("len_b"),
                )
                .where(
                    Duel.campaign_id == campaign_id,
                    Duel.status == DuelStatus.JUDGED,
                    Duel.choice.is_not(None),
                    Duel.id > after,
                )
                .order_by(Duel.id)
            ).all()
            if images:  # image answers: their sizes (larger_image_wins)
                rows = self._with_image_areas(s, campaign_id, rows, after)
        return self._keep_bias(cache, key, {"campaign_id": campaign_id, **judge_bias(rows, judge, models)}, last)

    @staticmethod
    def _keep_bias(cache: dict, key: tuple, out: dict[str, Any], last: int | None) -> dict[str, Any]:
        if last is not None:
            out["window"] = last
        if len(cache) >= RANKING_CACHE:
            cache.clear()
        cache[key] = out
        return out

    def export(self, campaign_id: int) -> dict[str, Any]:
        """``{"campaign_id", "files": {"certificate.json": text, "battles.jsonl": text, ...}, "images": {...}}``
        (the streamed text of :meth:`export_stream`, read back)."""
        return json.loads("".join(self.export_stream(campaign_id)))

    def export_stream(self, campaign_id: int) -> Iterator[str]:
        """The export's JSON in pieces (:mod:`.export_stream`): the campaign is looked up now (NotFound
        before the first piece), the log is read in pages as the pieces are taken."""
        data = self._results_data(campaign_id)
        if data["view"]["status"] == CampaignStatus.RUNNING:  # the table the dashboard keeps has fewer resamples
            ranking = self._ranking(data, int(data["view"]["seed"]) % 2**32)
        else:
            ranking = self.ranking(campaign_id)
        by_category = self.ranking_by_category(campaign_id)
        return self._export_pieces(campaign_id, data, ranking, by_category)

    def _export_pieces(self, campaign_id: int, data: dict, ranking: list, by_category: list) -> Iterator[str]:
        names = [m["name"] for m in data["view"]["models"]]
        L = len(names)
        wins = [[0] * L for _ in range(L)]
        ties = [[0] * L for _ in range(L)]
        style, hashes = StyleRows(), set[str]()

        def battle_lines(s, lm: LogMeta) -> Iterator[str]:
            for d in judged_duels(s, campaign_id, lm):
                a, b, ch = d["a"], d["b"], d["choice"]
                if ch == Choice.A:
                    wins[a][b] += 1
                elif ch == Choice.B:
                    wins[b][a] += 1
                elif ch in (Choice.TIE, Choice.BOTH_BAD):
                    ties[a][b] += 1
                    ties[b][a] += 1
                style.add(d)
                line = self._battle(names, campaign_id, d)
                if line is not None:
                    yield json.dumps(line)

        yield "{" + f'"campaign_id": {int(campaign_id)}, "files": {{'
        yield from json_file("certificate.json", [json.dumps(self._certificate(data), indent=1) + "\n"], first=True)
        with self.db.read() as s:
            if not self.db.is_sqlite:  # the log's two passes from one snapshot
                s.connection(execution_options={"isolation_level": "REPEATABLE READ"})
            self.db.client_paced(s)  # read as the client takes the pieces
            lm = LogMeta(s, campaign_id)
            yield from json_file("battles.jsonl", lines_in_pages(battle_lines(s, lm)))
            matrix = self._matrix_rows(names, wins, ties)
            yield from json_file("matrix.csv", [_csv(MATRIX_COLUMNS, matrix)])
            yield from json_file("ranking.csv", [_csv(list(ranking[0]) if ranking else ["rank", "model"], ranking)])
            yield from json_file("ranking.json", [json.dumps(ranking, indent=1) + "\n"])
            rows = [row for cat in by_category for row in cat["rows"]]
            yield from json_file("ranking_by_category.csv", [_csv(RANKING_BY_CATEGORY_COLUMNS, rows)])
            # the judge bias is counted on the pass that writes judgments.jsonl, or read apart (judge_bias)
            judge, models = s.execute(select(Campaign.judge, Campaign.models).where(Campaign.id == campaign_id)).one()
            images = any(m.get("output") == "image" for m in models or [])
            # an image campaign's sizes and a simulated or human judge's grouped read: Results.judge_bias
            apart = images or (judge or {}).get("kind") in GROUPED_BIAS_JUDGES
            bias = BiasTally(dict(judge or {}), list(models or []))
            judged = judge_calls(s, campaign_id, lm, None if apart else bias.count)
            yield from json_file("judgments.jsonl", lines_in_pages(iter_judgment_lines(names, judged)))
            report = self.judge_bias(campaign_id) if apart else {"campaign_id": campaign_id, **bias.report()}
            yield from json_file("judge_bias.json", [json.dumps(report, indent=1) + "\n"])
            yield from json_file("ranking_style.json", [json.dumps(style.report(names), indent=1) + "\n"])
            # the model answer files: the answers read once more, by model and prompt (streamed, not gathered)
            for path, lines in answer_files(names, _image_names(answer_rows(s, campaign_id), hashes), lm.question):
                yield from json_file(path, lines_in_pages(lines))
        yield '}, "images": {'
        for k, (path, b64) in enumerate(self._export_images(campaign_id, hashes)):
            yield from json_file(path, [b64], first=k == 0)
        yield "}}"

    @staticmethod
    def _with_image_areas(s, campaign_id: int, rows: Sequence[Any], after: int = 0) -> list:
        """``rows`` (the judged duels with a verdict and an id above ``after``) with ``area_a``/``area_b``: the
        pixels of each image answer (None for a text answer)."""
        answers = s.execute(
            select(Duel.answer_a, Duel.answer_b)
            .where(
                Duel.campaign_id == campaign_id,
                Duel.status == DuelStatus.JUDGED,
                Duel.choice.is_not(None),
                Duel.id > after,
            )
            .order_by(Duel.id)
        ).all()
        names = [[IMAGE_NAME.fullmatch(str(t or "")) for t in pair] for pair in answers]
        hashes = {m.group(1) for pair in names for m in pair if m}
        area = {
            r.sha256: int(r.width) * int(r.height)
            for r in s.execute(
                select(StoredImage.sha256, StoredImage.width, StoredImage.height).where(StoredImage.sha256.in_(hashes))
            )
        }
        out = []
        for r, (ma, mb) in zip(rows, names):
            a, b = (area.get(m.group(1)) if m else None for m in (ma, mb))
            out.append(SimpleNamespace(**r._asdict(), area_a=a, area_b=b))
        return out

    def _export_images(self, campaign_id: int, hashes: set[str]) -> Iterator[tuple[str, str]]:
        """``(images/<sha256>.<ext>, base64)`` of each image the answers (``hashes``) and the prompts name (as
        stored: the battle log names them by this hash), read one at a time."""
        hashes = set(hashes)
        with self.db.read() as s:
            self.db.client_paced(s)  # read as the client takes the pieces
            for (per_turn,) in s.execute(
                select(Prompt.images).where(Prompt.campaign_id == campaign_id, Prompt.images.is_not(None))
            ):
                hashes.update(h for turn in per_turn or [] for h in turn)
            for sha in sorted(hashes):
                r = s.execute(select(StoredImage).where(StoredImage.sha256 == sha)).scalar_one_or_none()
                if r is not None:
                    ext = r.media_type.split("/")[-1].replace("jpeg", "jpg")
                    yield f"images/{r.sha256}.{ext}", base64.b64encode(bytes(r.data)).decode("ascii")


def _image_names(rows: Iterator[Any], hashes: set[str]) -> Iterator[Any]:
    """``rows`` (answers) as they are, the images each names added to ``hashes`` on the way."""
    for r in rows:
        if IMAGE_TAG in r.answer:  # a plain substring test first: the pattern is dear per answer
            hashes.update(IMAGE_NAME.findall(r.answer))
        yield r


def _grouped_bias(s, campaign_id: int, after: int, tally: BiasTally) -> dict[str, Any]:
    """The judge bias report of a judge that is not an LLM (:data:`GROUPED_BIAS_JUDGES`) from one grouped read
    of the judged duels with an id above ``after``: per choice, which answer is longer, whether the verdict
    was reused (and the models shown, when the judge is a contestant), how many duels; its judge detail
    decoded for none of them."""
    len_a, len_b = func.length(Duel.answer_a), func.length(Duel.answer_b)
    cols = [
        Duel.choice.label("choice"),
        case(
            (len_a > len_b, literal_column("1")), (len_a < len_b, literal_column("-1")), else_=literal_column("0")
        ).label("longer"),
        cast(Duel.judge_detail, Text).like('%"reused_verdict"%').label("reused"),
    ]
    if tally.own:
        cols += [
            case((Duel.a_is_i, Duel.model_i), else_=Duel.model_j).label("model_a"),
            case((Duel.a_is_i, Duel.model_j), else_=Duel.model_i).label("model_b"),
        ]
    judged = (Duel.campaign_id == campaign_id, Duel.status == DuelStatus.JUDGED, Duel.choice.is_not(None))
    inner = select(*cols).where(*judged, Duel.id > after).subquery()
    keys = [inner.c[col.name] for col in cols]
    for r in s.execute(select(*keys, func.count().label("n")).group_by(*keys)):
        shown = (int(r.model_a), int(r.model_b)) if tally.own else None
        lengths = {1: (1, 0), -1: (0, 1)}.get(int(r.longer), (0, 0))
        detail = {"reused_verdict": True} if r.reused else None
        tally.count(r.choice, detail, lengths=lengths, shown=shown, n=int(r.n))
    return tally.report()


def _betting(data: dict[str, Any]) -> Ranking:
    """The ranking of the campaign's counted outcomes with its anytime-valid intervals, computed once per
    ``data`` (:meth:`Results._results_data`, itself once per version of the campaign)."""
    if "betting" not in data:
        data["betting"] = _rank(data["outcomes"], len(data["view"]["models"]), INTERVAL)
    return data["betting"]


def _num(x: float) -> float | None:
    return None if x != x else round(float(x), 4)


def _rank(outcomes: list[tuple[int, int, float, int]], n_models: int, interval: str, **kw: Any) -> Ranking:
    """The ranking of counted outcomes ``(model i, model j, score of i, duels)``."""
    return bootstrap_ranking(
        [o[0] for o in outcomes],
        [o[1] for o in outcomes],
        [o[2] for o in outcomes],
        n_models,
        weights=[o[3] for o in outcomes],
        level=INTERVAL_LEVEL,
        interval=interval,
        **kw,
    )


def _csv(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """A CSV file's text; text cells that a spreadsheet would run as a formula are escaped
    (:mod:`algorithms.csv_cells`)."""
    buf = io.StringIO()
    write_csv(buf, columns, rows)
    return buf.getvalue()
