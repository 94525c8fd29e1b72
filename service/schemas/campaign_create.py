"""The body of ``POST /v1/campaigns``: models, prompts, judge, limits, resolved costs."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, PrivateAttr, Strict, ValidationInfo, field_validator, model_validator

from algorithms.thresholds import DELTA_MIN
from algorithms.vocabulary import Algorithm, PromptSampling, Reuse, TiePolicy
from service.clients.config import (
    URL_CREDENTIALS,
    ClientConfig,
    client_json,
    parse_client_config,
    split_image_count,
    url_problem,
)
from service.images.checks import MAX_IMAGES_PER_PROMPT, data_url_size
from service.images.tokens import campaign_image_tokens, image_input_tokens
from service.judging import JudgeConfig, check_judge_size, judge_json
from service.names import duplicate_names
from service.pricing import (
    DEFAULT_EXPECTED_OUTPUT_TOKENS,
    lookup_batch_price,
    normalise_price_map,
    resolve_image_cost,
    resolve_model_cost,
)
from service.prompts import normalize_prompt, turn_image_urls
from service.schemas.batch_config import BatchConfig, parse_batch
from service.schemas.common import (
    MAX_MODELS,
    MAX_PROMPT_CHARS,
    MAX_PROMPTS,
    USD,
    ImageURL,
    Name,
    PromptText,
    QueryUSD,
    StrictModel,
    check_json_safe,
    check_text,
)


class ModelSpec(StrictModel):
    name: Name = Field(description="Unique name of the model within the campaign.")
    cost: QueryUSD | None = Field(
        None,
        description="Expected cost of one query in USD (used by the policy). Omitted: derived from the model's "
        "per-token price (client.price or the price map) and the expected tokens (docs/service.md, Pricing).",
    )
    expected_output_tokens: int | None = Field(
        None,
        ge=0,
        le=10_000_000,
        description="Output tokens of one answer for a derived cost (default: the campaign's).",
    )
    cost_source: Literal["configured", "price_map"] | None = Field(
        None,
        description="Which cost wins when the model has both a `cost` and a price-map price: configured (the "
        "policy uses `cost` and each call is charged it) or price_map (the cost is derived from the price and "
        "calls are charged per token). Absent: a `cost` that disagrees with the price map's derived cost by more "
        "than a factor 2 is a 422 (docs/service.md, Pricing).",
    )
    output: Literal["text", "image"] = Field(
        "text",
        description="What the model answers: text (default) or image (an image model: OpenAI's "
        "`POST {base_url}/images/generations` on an openai client, image output on a gemini client; "
        "docs/guide.md, Image campaigns).",
    )
    client: ClientConfig = Field(
        description="How to call the model: one config per `kind` (simulated, openai, anthropic, gemini). "
        "Keys are never accepted; `api_key_env` names the environment variable that holds one.",
        examples=[{"kind": "simulated"}, {"kind": "openai", "model": "deepseek-chat", "api_key_env": "DS_KEY"}],
    )
    _pricing: dict[str, Any] | None = PrivateAttr(None)  # set by CampaignCreate (service.pricing)
    _image_tokens: int = PrivateAttr(0)  # set by CampaignCreate (service.images.tokens)

    def query_cost(self) -> float:
        """The cost per query the policy uses: given, or derived by :class:`CampaignCreate` (set once the
        campaign is validated)."""
        if self.cost is None:
            raise ValueError(f"model {self.name!r}: no cost (the campaign was not validated)")
        return self.cost

    def stored(self) -> dict[str, Any]:
        """The model as a campaign stores it (after :class:`CampaignCreate` resolved its cost and price)."""
        out = {"name": self.name, "cost": self.cost, "client": client_json(self.client)}
        if self.output == "image":
            out["output"] = "image"
        if self._pricing is not None:
            out["pricing"] = self._pricing
        if self._image_tokens:  # the most input tokens one of the campaign's prompt images costs it
            out["image_tokens"] = self._image_tokens
        return out

    @field_validator("client", mode="wrap")
    @classmethod
    def _client(cls, v: Any, handler: Any, info: ValidationInfo) -> Any:
        if isinstance(v, dict):
            check_json_safe(v, "client")
        if info.data.get("output") != "image":
            return handler(v)
        v, n = split_image_count(v)  # an image model may ask for several images a call (service/campaigns/spares.py)
        cfg = handler(v)
        if n is not None:
            cfg.params["n"] = n
        return cfg

    @model_validator(mode="after")
    def _image_output(self) -> "ModelSpec":
        if self.output == "image" and self.client.kind not in ("openai", "gemini"):
            raise ValueError(
                f"output: image needs an openai client (the images route) or a gemini client, not {self.client.kind}"
            )
        return self


class PromptTurn(StrictModel):
    content: PromptText
    images: list[ImageURL] | None = Field(
        None, max_length=MAX_IMAGES_PER_PROMPT, description="This turn's images as data: URLs (PNG, JPEG, WebP, GIF)."
    )


class PromptObject(StrictModel):
    """A prompt with an id, a category, several user turns or a reference answer (``service/prompts.py``)."""

    id: Name | None = Field(None, description="The question's id (arena-hard `question_id`), kept in the duel log.")
    prompt: PromptText | None = None
    turns: list[PromptText | PromptTurn] | None = Field(
        None,
        min_length=1,
        max_length=64,
        description="User turns, sent in order as consecutive user messages of one call (docs/guide.md).",
    )
    category: Name | None = None
    reference: PromptText | None = Field(None, description="A reference answer handed to the judge.")
    images: list[ImageURL] | None = Field(
        None,
        max_length=MAX_IMAGES_PER_PROMPT,
        description="Images of the (first) user turn as data: URLs (PNG, JPEG, WebP, GIF); remote URLs are refused.",
    )

    @model_validator(mode="after")
    def _one_text(self) -> "PromptObject":
        if (self.prompt is None) == (self.turns is None):
            raise ValueError("a prompt object needs exactly one of 'prompt' or 'turns'")
        count = len(self.images or []) + sum(len(t.images or []) for t in self.turns or [] if isinstance(t, PromptTurn))
        if count > MAX_IMAGES_PER_PROMPT:
            raise ValueError(f"images: at most {MAX_IMAGES_PER_PROMPT} per prompt (got {count})")
        if self.turns is not None:
            total = sum(len(t if isinstance(t, str) else t.content) for t in self.turns)
            if total > MAX_PROMPT_CHARS:
                raise ValueError(f"turns: at most {MAX_PROMPT_CHARS} characters in all")
        return self


class CampaignCreate(StrictModel):
    name: Name
    delta: float = Field(
        0.05,
        ge=DELTA_MIN,
        lt=1,
        allow_inf_nan=False,
        description=f"Error probability of the certificate, in [{DELTA_MIN:g}, 1).",
    )
    algorithm: Algorithm = Field(
        Algorithm.DCTAS_PC,
        description="dctas-pc (default: pairwise certificates, can answer 'no Condorcet winner'; not from the "
        "paper) or one of the paper's five, whose certificate assumes a Condorcet winner exists.",
    )
    goal: Literal["winner", "top_k", "ranking"] = Field(
        "winner",
        description="What to certify: winner (default: the Condorcet winner), top_k (the best k models, with "
        "`k`) or ranking (the full order, ties and cycles as tiers). top_k and ranking need algorithm dctas-pc "
        "and a judge other than hybrid (docs/algorithms.md, Certified leaderboard).",
    )
    k: int | None = Field(None, ge=1, le=MAX_MODELS, description="goal top_k: the size of the certified top set.")
    models: list[ModelSpec] = Field(min_length=2, max_length=MAX_MODELS)
    prompts: list[PromptText | PromptObject] = Field(
        min_length=1,
        max_length=MAX_PROMPTS,
        description='Strings, or objects {"id", "prompt" | "turns", "category", "reference"} (arena-hard style).',
    )
    judge: JudgeConfig = Field(
        description="Where preferences come from: one config per `kind` (human, simulated, llm).",
        examples=[{"kind": "human"}, {"kind": "llm", "client": {"kind": "openai", "model": "gpt-4.1"}}],
    )
    budget: USD | None = Field(
        None, description="Spend limit in USD (never overrun: each duel reserves an upper bound of its cost)."
    )
    max_duels: int | None = Field(None, ge=1, le=10**9, description="End the campaign after this many judged duels.")
    tie_policy: TiePolicy | None = Field(
        None,
        description="What a tie does to the statistics: drop, half or random. Absent: half for a campaign whose "
        "prompt_sampling resolves to without_replacement, drop otherwise (the view shows the resolved value).",
    )
    prompt_sampling: PromptSampling = Field(
        PromptSampling.AUTO,
        description="How duels draw their prompts (docs/reuse.md). with_replacement: uniformly at random for "
        "each duel. without_replacement: pair (i, j)'s q-th duel uses prompt q of a secret permutation shared "
        "by all pairs; needs algorithm dctas-pc, answers reuse, an llm or simulated judge and tie_policy half "
        "(random is refused: the exact test would certify the tie coin); can end 'undecidable' (no winner on this prompt set). auto (default): without_replacement "
        "when those hold, the judge is an llm judge and verdicts is reuse, else with_replacement. The "
        "resolved value is stored.",
    )
    answers: Reuse = Field(
        Reuse.REUSE,
        description="reuse (default): one answer per (model, prompt), paid once and shared with every campaign "
        "using the same generation config; fresh: a new answer per duel (sampling at temperature > 0). "
        "Simulated models always answer per duel (docs/reuse.md).",
    )
    verdicts: Reuse = Field(
        Reuse.REUSE,
        description="reuse (default): an LLM judge rules once per (prompt, answer pair, order); fresh: a new "
        "verdict per duel. Human judges always give fresh votes.",
    )
    seed: int | None = Field(
        None,
        ge=0,
        le=2**62,
        description="Seed of the automatic judges' random draws. The prompt, answer order and tie "
        "coin are drawn from a secret per-campaign key instead (docs/reliability.md, Blinding).",
    )
    webhook_url: str | None = Field(
        None, max_length=2000, description="POSTed the final report once the campaign ends."
    )
    webhook_events: list[Literal["campaign.ended", "campaign.settled"]] | None = Field(
        None,
        min_length=1,
        max_length=2,
        description="The events webhook_url receives (default ['campaign.ended']): campaign.ended at the ending, "
        "campaign.settled once its spend is final (spend_final). docs/service.md, Webhook.",
    )
    batch: Annotated[bool, Strict()] | BatchConfig | None = Field(
        None,
        description="Run the background run in rounds on the providers' batch APIs (about half the list price, "
        "answered within the batch window): true for the defaults, or an object (round_size, growth, "
        "max_round_size, poll_seconds, window_seconds). With a human judge (and answers: reuse) the answers pre-generated "
        "for annotators are bought in batches. docs/service.md, Batch campaigns.",
    )
    max_pending_per_annotator: int = Field(
        1,
        ge=1,
        le=100,
        description="Duels one annotator may hold in flight at once; asking for another at the limit "
        "hands back the annotator's oldest such duel (200) instead of starting a new one.",
    )

    price_map: dict[str, Any] | None = Field(
        None,
        description="Per-token prices in LiteLLM's format ({model: {input_cost_per_token, output_cost_per_token}}); "
        "its entries win over the LLMDUEL_PRICE_MAP file and the bundled map.",
    )
    expected_output_tokens: int = Field(
        DEFAULT_EXPECTED_OUTPUT_TOKENS,
        ge=0,
        le=10_000_000,
        description="Output tokens of one answer, for the cost of models without a 'cost' (docs/service.md, Pricing).",
    )

    @field_validator("judge", mode="before")
    @classmethod
    def _judge(cls, v: Any) -> Any:
        if isinstance(v, dict):
            check_json_safe(v, "judge")
        return v

    def stored_judge(self) -> dict[str, Any]:
        """The judge config as the campaign row stores it."""
        return judge_json(self.judge)

    @field_validator("webhook_url")
    @classmethod
    def _webhook(cls, v: str | None) -> str | None:
        if v is None:
            return v
        check_text(v)
        try:
            parts = urlsplit(v)
        except ValueError:
            raise ValueError("webhook_url: not a valid URL") from None
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("webhook_url: must be an absolute http(s) URL")
        problem = url_problem(v)
        if problem == URL_CREDENTIALS:
            raise ValueError(f"webhook_url: {URL_CREDENTIALS}; requests are signed with the webhook secret")
        if problem:
            raise ValueError(f"webhook_url: {problem}")
        return v

    @model_validator(mode="after")
    def _cross(self) -> "CampaignCreate":
        repeated = duplicate_names([m.name for m in self.models])
        if repeated:
            raise ValueError(
                f"models: names must be unique after Unicode (NFKC) and whitespace normalisation; "
                f"{repeated[0]!r} repeats another model's name"
            )
        qids = [p.id for p in self.prompts if isinstance(p, PromptObject) and p.id is not None]
        if len(set(qids)) != len(qids):
            raise ValueError("prompts: ids must be unique")
        check_judge_size(self.judge, len(self.models))
        if self.webhook_events is not None:
            if not self.webhook_url:
                raise ValueError("webhook_events: needs a webhook_url to send them to")
            if len(set(self.webhook_events)) != len(self.webhook_events):
                raise ValueError("webhook_events: each event at most once")
        self._check_goal()
        from service.campaigns.spares import several_images_reason

        several = several_images_reason([m.stored() for m in self.models], self.answers)
        if several is not None:
            raise ValueError(several)
        self._resolve_sampling()
        from service.campaigns import hybrid  # hybrid hook: the combinations a hybrid judge refuses

        if hybrid.is_hybrid(self.stored_judge()):
            reason = hybrid.refusal(self.algorithm, self.prompt_sampling, self.tie_policy)
            if reason is not None:
                raise ValueError(f"judge: {reason}")
        self._resolve_costs()
        self._resolve_batch()
        self._resolve_image_tokens()
        from service.money.bounds import excessive_cost_reason, unbounded_cost_reason

        models, judge = [m.stored() for m in self.models], self.stored_judge()
        reason = excessive_cost_reason(models, judge)
        if reason is None and self.budget is not None:
            reason = unbounded_cost_reason(models, judge)
        if reason is not None:
            raise ValueError(reason)
        return self

    def _check_goal(self) -> None:
        """``goal`` and ``k``: k with top_k only, in [1, models - 1]; a leaderboard needs dctas-pc's certificates."""
        from algorithms.leaderboard import validate_goal

        try:
            validate_goal(self.goal, self.k, len(self.models))
        except ValueError as exc:
            raise ValueError(f"goal: {exc}") from None
        if self.goal != "winner" and self.algorithm != Algorithm.DCTAS_PC:
            raise ValueError(f"goal: {self.goal} needs algorithm dctas-pc (its pairwise certificates)")
        if self.goal != "winner" and self.stored_judge().get("kind") == "hybrid":
            raise ValueError(f"goal: {self.goal} is not available with a hybrid judge")

    def _resolve_sampling(self) -> None:
        """Resolve ``prompt_sampling: auto`` and an absent ``tie_policy`` (stored resolved)."""
        from service.campaigns.sampling import resolve_prompt_sampling

        sampling, tie_policy = resolve_prompt_sampling(
            self.prompt_sampling,
            self.tie_policy,
            algorithm=self.algorithm,
            answers=self.answers,
            verdicts=self.verdicts,
            judge_kind=self.stored_judge().get("kind"),
        )
        self.prompt_sampling, self.tie_policy = PromptSampling(sampling), TiePolicy(tie_policy)

    def stored_batch(self) -> dict[str, Any] | None:
        """The ``batch`` setting as stored (None: call by call)."""
        return parse_batch(self.batch)

    def _resolve_batch(self) -> None:
        """A batch campaign: an automatic judge, and each HTTP client's batch price (service.pricing)."""
        if self.stored_batch() is None:
            return
        kind = self.stored_judge().get("kind")
        if kind == "hybrid":
            raise ValueError("batch: needs an automatic judge (llm, jury or simulated) or a human one, not hybrid")
        if kind == "human" and self.answers != "reuse":
            raise ValueError(
                "batch: with a human judge, the answers pre-generated for annotators are bought in batches, "
                "which needs answers: reuse"
            )
        user_map = normalise_price_map(self.price_map, "price_map", strict=True) if self.price_map is not None else None
        for m in self.models:
            client = client_json(m.client)
            if client.get("kind") == "simulated" or client.get("batch_price") is not None:
                continue
            if (getattr(m, "_pricing", None) or {}).get("price_source") not in (None, "client"):
                client.pop("price", None)  # the list price came from a map: the batch price from the same entry
            price = lookup_batch_price(client, user_map)
            client = client_json(m.client)
            if price is not None and client.get("price") is not None:
                m.client = parse_client_config({**client, "batch_price": price.as_client_price()}, output=m.output)
        self.judge = _with_batch_prices(self.judge, user_map)

    def _prompt_image_sizes(self) -> list[list[tuple[int, int]]]:
        """The (width, height) of each prompt's images, a list per prompt (empty without images)."""
        return [
            [data_url_size(u) for t in turn_image_urls(p.model_dump()) for u in t]
            if isinstance(p, PromptObject)
            else []
            for p in self.prompts
        ]

    def _resolve_image_tokens(self) -> None:
        """Each model's largest input-token count of one of the prompts' images (its provider's rule):
        the budget's bound of a call counts it for each image of the call's prompt (bounds.model_bound_nusd)."""
        urls = {
            u for p in self.prompts if isinstance(p, PromptObject) for t in turn_image_urls(p.model_dump()) for u in t
        }
        if not urls:
            return
        sizes = [data_url_size(u) for u in urls]
        for m in self.models:
            m._image_tokens = campaign_image_tokens(client_json(m.client), sizes)

    def _resolve_costs(self) -> None:
        """Each model's price (client, price maps) and expected cost per query (service.pricing)."""
        check_json_safe(self.price_map, "price_map")
        user_map = normalise_price_map(self.price_map, "price_map", strict=True) if self.price_map is not None else None
        sizes = self._prompt_image_sizes()
        for m in self.models:
            if m.output == "image" and getattr(m.client, "price", None) is None:
                m.cost, m._pricing = resolve_image_cost(m.name, m.cost, client_json(m.client))
                continue
            # a prompt's images are input tokens too: their mean per prompt, by the model's provider's rule
            images = sum(image_input_tokens(client_json(m.client), w, h) for p in sizes for w, h in p) / len(sizes)
            cost, client, record = resolve_model_cost(
                m.name,
                m.cost,
                client_json(m.client),
                prompts=[normalize_prompt(p)["text"] for p in self.prompts],
                expected_output_tokens=m.expected_output_tokens
                if m.expected_output_tokens is not None
                else self.expected_output_tokens,
                price_map=user_map,
                cost_source=m.cost_source,
                image_input_tokens=images,
            )
            m.cost, m.client, m._pricing = cost, parse_client_config(client, output=m.output), record


def _with_batch_prices(judge: Any, user_map: dict | None) -> Any:
    """An LLM judge's (or each juror's) client with its batch price filled in when one is known."""

    def priced(cfg: Any) -> Any:
        client = getattr(cfg, "client", None)
        if client is None or client.kind == "simulated" or client.price is None or client.batch_price is not None:
            return cfg
        price = lookup_batch_price(client_json(client), user_map)
        if price is None:
            return cfg
        return cfg.model_copy(
            update={"client": parse_client_config({**client_json(client), "batch_price": price.as_client_price()})}
        )

    jurors = getattr(judge, "judges", None)
    if isinstance(jurors, list):
        return judge.model_copy(update={"judges": [priced(j) for j in jurors]})
    return priced(judge)
