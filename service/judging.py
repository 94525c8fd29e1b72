"""A campaign's ``judge`` config as pydantic models, and :func:`build_judge`, which builds the judge
(and an LLM judge's model client, given to the judge; judges/ never imports the service).

``JudgeConfig`` is the discriminated union (on ``kind``) of :class:`HumanJudgeConfig`,
:class:`SimulatedJudgeConfig`, :class:`LLMJudgeConfig` and :class:`JuryJudgeConfig`. The API body
(``service.schemas.CampaignCreate.judge``) is typed with it; :func:`parse_judge_config`
validates a stored row or a plain dict into the same models. ``model_dump(mode="json")``
is what the database stores; rows stored before these models existed parse unchanged.
"""

from __future__ import annotations

import re
import string
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

from algorithms.vocabulary import JudgeKind
from judges import TIE_POLICIES, HumanJudge, Judge, JuryJudge, LLMJudge, SimulatedJudge
from judges.llm import (
    DEFAULT_VERDICT,
    JUDGE_TEMPLATE,
    TEMPLATE_FIELDS,
    VerdictRule,
)
from service.clients import build_client
from service.clients.config import (
    MAX_QUERY_USD,
    HTTPClientConfig,
    finite_number,
    format_validation_error,
    money,
    strict_bool,
)

JUDGE_KINDS: tuple[str, ...] = tuple(k.value for k in JudgeKind)
PREFERENCE_TOL = 1e-6
MAX_TEMPLATE_CHARS = 50_000
MAX_PATTERN_CHARS = 500
MAX_LABELS = 32


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# ---------------------------------------------------------------- human
class HumanJudgeConfig(_Config):
    """People vote through the annotator page or ``POST /v1/duels/{id}/vote``."""

    kind: Literal[JudgeKind.HUMAN] = Field(description="Human annotators.")
    fee_per_vote: Annotated[float, money("USD paid per vote")] = Field(
        0.0,
        ge=0,
        le=MAX_QUERY_USD,
        description="USD paid to an annotator per recorded vote: charged in the ledger as a judge charge, "
        "reserved by the budget and used as the judge cost c_J of the allocation.",
        examples=[0.05],
    )
    guidelines: str | None = Field(
        None,
        max_length=20_000,
        description="Guidelines shown to annotators above every duel on the voting page (Markdown, rendered "
        "without raw HTML, images or scripts; at most 20,000 characters).",
        examples=["Prefer the answer that is **correct** first, then the clearer one."],
    )


# ---------------------------------------------------------------- simulated
def _preference(p: Any) -> list[list[float]]:
    if not isinstance(p, list) or not p:
        raise ValueError("is required: a square matrix (list of rows) in the order of the models")
    n = len(p)
    if n < 2:
        raise ValueError("needs at least 2 models")
    for i, row in enumerate(p):
        if not isinstance(row, list) or len(row) != n:
            raise ValueError(
                f"must be square: row {i} has {len(row) if isinstance(row, list) else 'no'} entries, expected {n}"
            )
    out = []
    for i, row in enumerate(p):
        r = []
        for j, x in enumerate(row):
            v = finite_number(x)
            if v is None:
                raise ValueError(f"[{i}][{j}]: must be a number")
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"[{i}][{j}]: must be in [0, 1], got {v}")
            r.append(v)
        out.append(r)
    for i in range(n):
        for j in range(i + 1, n):
            if abs(out[i][j] + out[j][i] - 1.0) > PREFERENCE_TOL:
                raise ValueError(f"p[{i}][{j}] + p[{j}][{i}] must equal 1 (got {out[i][j]} + {out[j][i]})")
    return out


class SimulatedJudgeConfig(_Config):
    """Winners drawn from a preference matrix (offline; costs nothing)."""

    kind: Literal[JudgeKind.SIMULATED] = Field(description="Simulated judge.")
    preference: Annotated[list[list[float]], BeforeValidator(_preference)] = Field(
        description="preference[i][j] = P(model i beats model j), a square matrix in the order of the "
        "campaign's models with p[i][j] + p[j][i] = 1.",
        examples=[[[0.5, 0.7], [0.3, 0.5]]],
    )
    tie_prob: Annotated[float, BeforeValidator(lambda v: _tie_prob(v))] = Field(
        0.0, ge=0, lt=1, description="Probability that a duel is a tie (drawn before the winner)."
    )


def _tie_prob(v: Any) -> float:
    x = finite_number(v)
    if x is None or not 0.0 <= x < 1.0:
        raise ValueError(f"must be a number in [0, 1), got {str(v)[:40]}")
    return x


# ---------------------------------------------------------------- llm
def _template(v: Any) -> Any:
    if v is None:
        return v
    if not isinstance(v, str) or not v.strip():
        raise ValueError("must be a non-empty string")
    if len(v) > MAX_TEMPLATE_CHARS:
        raise ValueError(f"must be at most {MAX_TEMPLATE_CHARS} characters")
    try:
        parsed = list(string.Formatter().parse(v))
    except ValueError as exc:
        raise ValueError(f"is not a valid template ({exc}); write a literal brace as {{{{ or }}}}") from None
    fields = set()
    for _, name, spec, conv in parsed:
        if name is None:
            continue
        if name not in TEMPLATE_FIELDS or spec or conv:
            raise ValueError(
                f"unknown field {{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}; "
                f"the fields are {', '.join('{' + f + '}' for f in TEMPLATE_FIELDS)} "
                "(write a literal brace as {{ or }})"
            )
        fields.add(name)
    missing = [f for f in ("question", "answer_a", "answer_b") if f not in fields]
    if missing:
        raise ValueError(f"must contain {', '.join('{' + f + '}' for f in missing)}")
    return v


def _nested_repeat(items: Any, inside: bool = False) -> bool:
    """Does a parsed regex repeat something that itself repeats (``(a+)+``)? Such patterns can
    take exponential time on a reply that almost matches."""
    import re._constants as c

    for op, av in items:
        if op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            repeats = av[1] > 1 and av[0] != av[1]  # a fixed count (a{2}) does not branch
            if (repeats and inside) or _nested_repeat(av[2], inside or repeats):
                return True
        elif op in (c.SUBPATTERN, c.ATOMIC_GROUP, c.ASSERT, c.ASSERT_NOT):
            sub = av[-1] if op != c.ATOMIC_GROUP else av
            if _nested_repeat(sub, inside):
                return True
        elif op == c.BRANCH:
            if any(_nested_repeat(b, inside) for b in av[1]):
                return True
    return False


def _regexes(v: Any) -> Any:
    if isinstance(v, str):
        v = [v]
    if not isinstance(v, list) or not v or len(v) > 8:
        raise ValueError("must be a regular expression or a list of 1 to 8")
    for n, p in enumerate(v):
        if not isinstance(p, str) or not p or len(p) > MAX_PATTERN_CHARS:
            raise ValueError(f"[{n}]: must be a non-empty string of at most {MAX_PATTERN_CHARS} characters")
        try:
            rx = re.compile(p)
        except re.error as exc:
            raise ValueError(f"[{n}]: is not a valid regular expression ({exc})") from None
        if rx.groups != 1:
            raise ValueError(f"[{n}]: must have exactly one capturing group (the verdict label), has {rx.groups}")
        import re._parser as sre_parse

        if _nested_repeat(sre_parse.parse(p)):
            raise ValueError(f"[{n}]: must not repeat a repetition such as (a+)+: it can take exponential time")
    return v


def mirror_label(label: str) -> str:
    """The label with A and B swapped: the same verdict seen from the other answer ("A>>B" -> "B>>A")."""
    return label.translate(str.maketrans("ABab", "BAba"))


class VerdictPatterns(_Config):
    """How a verdict is read from the judge model's reply, and what it is worth to answer A."""

    regex: Annotated[list[str], BeforeValidator(_regexes)] = Field(
        description="Regular expression(s) with one capturing group, the verdict label. Tried in order; the "
        "first that matches gives the LAST of its matches in the reply (in its final 20,000 characters).",
        examples=[[r"\[\[([AB<>=]+)\]\]", r"\[([AB<>=]+)\]"]],
    )
    scores: dict[str, float] = Field(
        description="Verdict label -> score of answer A in [0, 1] (1: A won, 0: B won, 0.5: tie). A label and "
        "its mirror (A and B swapped) must add to 1. A label not listed is no verdict (a judge error).",
        examples=[{"A>>B": 1.0, "A>B": 0.75, "A=B": 0.5, "B>A": 0.25, "B>>A": 0.0}],
    )
    ignore_case: Annotated[bool, BeforeValidator(strict_bool)] = Field(
        True, description="Match the regex and the labels case-insensitively."
    )

    @model_validator(mode="after")
    def _check(self) -> "VerdictPatterns":
        if not self.scores or len(self.scores) > MAX_LABELS:
            raise ValueError(f"scores: must map 1 to {MAX_LABELS} labels to scores")
        keys: dict[str, str] = {}
        for label, s in self.scores.items():
            if not label.strip() or len(label) > 64:
                raise ValueError("scores: labels must be non-empty strings of at most 64 characters")
            if not 0.0 <= s <= 1.0:
                raise ValueError(f"scores.{label}: must be in [0, 1], got {s}")
            key = label.strip().upper() if self.ignore_case else label.strip()
            if key in keys:
                raise ValueError(f"scores: labels {keys[key]!r} and {label!r} are the same verdict")
            keys[key] = label
        for label, s in self.scores.items():
            m = mirror_label(label)
            if m in self.scores and abs(s + self.scores[m] - 1.0) > 1e-9:
                raise ValueError(
                    f"scores: {label!r} ({s:g}) and its mirror {m!r} ({self.scores[m]:g}) must add to 1, "
                    "or the order the answers are shown in would favour one side"
                )
        return self

    def rule(self) -> VerdictRule:
        return VerdictRule(tuple(self.regex), dict(self.scores), self.ignore_case)


def _simulated_judge_client(v: Any) -> Any:
    if isinstance(v, dict) and v.get("kind") == "simulated":
        raise ValueError(".kind: a simulated client cannot judge; use the judge kind 'simulated'")
    if v is None:
        raise ValueError('is required: the judge model\'s client config, e.g. {"kind": "openai", ...}')
    return v


class LLMJudgeConfig(_Config):
    """A judge model (any HTTP client kind) compares the two answers, by default in one or both orders as its
    measured tie and flip rates say is cheaper (``orders: auto``)."""

    kind: Literal[JudgeKind.LLM] = Field(description="LLM as a judge.")
    client: Annotated[HTTPClientConfig, BeforeValidator(_simulated_judge_client)] = Field(
        description="The judge model's client config (kind openai, anthropic or gemini).",
        examples=[{"kind": "openai", "model": "gpt-4.1", "api_key_env": "OPENAI_API_KEY"}],
    )
    cost: Annotated[float, money("USD per judge call when the client has no price")] = Field(
        0.0,
        ge=0,
        le=MAX_QUERY_USD,
        description="USD per judge call (charged when the client has no price or no usage is reported).",
    )
    orders: Literal["both", "one", "auto"] = Field(
        "auto",
        description="both: judge each duel twice, the answers swapped the second time (two calls); one: judge "
        "it once, in the order the answers are shown, which the campaign draws with its secret key (one call; "
        "position bias becomes zero-mean noise); auto (not for jurors or a hybrid's judge): both "
        "orders until the measured tie and flip rates say one order is cheaper, then one order with a few duels "
        "still read in both, and back to both when the rates change (the default). All estimate the preference "
        "averaged over the two orders.",
    )
    both_orders: Annotated[bool, BeforeValidator(strict_bool)] = Field(
        False,
        description="The older spelling of orders (true = both, false = one); stored equal to orders == both.",
    )
    system_prompt: Annotated[str | None, BeforeValidator(lambda v: _system(v))] = Field(
        None,
        description="System prompt of the judge model (null: none). Replaces client.system, which must then be unset.",
    )
    prompt_template: Annotated[str | None, BeforeValidator(_template)] = Field(
        None,
        description="The judge prompt with the fields {question}, {answer_a}, {answer_b} (all required) and "
        "{reference} (the prompt's reference answer, empty when it has none); {{ and }} are literal braces. "
        "null: the built-in template, whose verdicts are [[A]], [[B]] and [[C]] (tie).",
    )
    verdict_patterns: VerdictPatterns | None = Field(
        None,
        description="How verdicts are read and scored; null: the built-in [[A]] = 1, [[B]] = 0, [[C]] = 0.5.",
    )
    combine: Literal["consistent", "mean"] = Field(
        "consistent",
        description="How both orders combine (scores of the answer shown as A): consistent = the mean when "
        "both favour the same answer (or both say tie), else a tie; mean = the mean of the two scores.",
    )
    verdict_probabilities: Annotated[bool, BeforeValidator(strict_bool)] = Field(
        False,
        description="Score each call's verdict by the judge model's probabilities of the verdict labels: the "
        "request asks for log probabilities (openai: logprobs and top_logprobs; gemini: responseLogprobs and "
        "logprobs), and the score is the labels' scores weighted by their probabilities at the verdict token, "
        "renormalised over the labels. A provider that returns none (anthropic), or a label that is not one "
        "token: the bare label's score, as without this option.",
    )

    @model_validator(mode="before")
    @classmethod
    def _orders(cls, data: Any) -> Any:
        """``orders`` and its older spelling ``both_orders`` say the same thing; a row with only one gets both."""
        if not isinstance(data, dict):
            return data
        has_orders, has_both = "orders" in data, "both_orders" in data
        if has_both and not isinstance(data["both_orders"], bool):
            return data  # strict_bool names the field
        if has_orders and data["orders"] not in ("both", "one", "auto"):
            return data  # the Literal names the field
        if has_orders and has_both and (data["orders"] == "both") != data["both_orders"]:
            raise ValueError(
                f"orders: {data['orders']!r} contradicts both_orders: {str(data['both_orders']).lower()}; give only orders"
            )
        if has_orders:
            return {**data, "both_orders": data["orders"] == "both"}
        if has_both:
            return {**data, "orders": "both" if data["both_orders"] else "one"}
        # neither: the default, auto (every stored row has both_orders, so this is a new config)
        return {**data, "orders": "auto", "both_orders": False}

    @model_validator(mode="after")
    def _check(self) -> "LLMJudgeConfig":
        if self.system_prompt is not None and self.client.system is not None:
            raise ValueError("system_prompt: set the judge's system prompt here or in client.system, not both")
        return self

    def verdict_rule(self) -> VerdictRule:
        return self.verdict_patterns.rule() if self.verdict_patterns is not None else DEFAULT_VERDICT

    def template(self) -> str:
        return self.prompt_template if self.prompt_template is not None else JUDGE_TEMPLATE


def _system(v: Any) -> Any:
    if v is not None and (not isinstance(v, str) or len(v) > MAX_TEMPLATE_CHARS):
        raise ValueError(f"must be a string of at most {MAX_TEMPLATE_CHARS} characters")
    return v


# ---------------------------------------------------------------- jury
MAX_JURORS = 9


def _jurors(v: Any) -> Any:
    if not isinstance(v, list) or not 2 <= len(v) <= MAX_JURORS:
        raise ValueError(f"must be a list of 2 to {MAX_JURORS} LLM judge configs (the jurors)")
    out = []
    for n, j in enumerate(v):
        if isinstance(j, dict) and j.get("kind", "llm") != "llm":
            raise ValueError(f"[{n}].kind: a juror is an LLM judge (kind llm), got {str(j.get('kind'))[:40]!r}")
        out.append(_fixed_orders({**j, "kind": "llm"}, f"[{n}]") if isinstance(j, dict) else j)
    return out


def _fixed_orders(judge: dict, where: str) -> dict:
    """A juror or a hybrid's LLM judge reads a fixed number of orders: ``both`` unless it says otherwise
    (``orders: auto`` is a campaign's own LLM judge's: its mode follows that judge's own verdicts)."""
    if judge.get("orders") == "auto":
        raise ValueError(
            f"{where}.orders: auto is for a campaign's own llm judge; a juror or a hybrid's judge reads both or one"
        )
    if "orders" not in judge and "both_orders" not in judge:
        return {**judge, "orders": "both"}
    return judge


class JuryJudgeConfig(_Config):
    """Several LLM judges (jurors) judge each duel; their verdicts combine by majority or mean."""

    kind: Literal[JudgeKind.JURY] = Field(description="A jury of LLM judges.")
    judges: Annotated[list[LLMJudgeConfig], BeforeValidator(_jurors)] = Field(
        description=f"The jurors: 2 to {MAX_JURORS} LLM judge configs (kind llm may be left out); each is paid "
        "for its own calls (its cost, its orders).",
        examples=[
            [
                {"client": {"kind": "openai", "model": "gpt-4.1", "api_key_env": "OPENAI_API_KEY"}},
                {"client": {"kind": "anthropic", "model": "claude-sonnet-4-5", "api_key_env": "ANTHROPIC_API_KEY"}},
                {"client": {"kind": "gemini", "model": "gemini-2.5-pro", "api_key_env": "GEMINI_API_KEY"}},
            ]
        ],
    )
    combine: Literal["majority", "mean"] = Field(
        "majority",
        description="majority: the answer more jurors favour wins (equal votes: a tie); mean: the mean of the "
        "jurors' scores of answer A (graded).",
    )

    def juror_names(self) -> list[str]:
        """Each juror's label: its client's model, with its position when two jurors share a model."""
        models = [j.client.model for j in self.judges]
        return [m if models.count(m) == 1 else f"{m}#{n + 1}" for n, m in enumerate(models)]


# ---------------------------------------------------------------- hybrid
AUTOMATIC_KINDS = (JudgeKind.LLM.value, JudgeKind.JURY.value, JudgeKind.SIMULATED.value)
HYBRID_KIND = "hybrid"


def _automatic(v: Any) -> Any:
    if isinstance(v, dict) and v.get("kind") not in AUTOMATIC_KINDS:
        raise ValueError(
            f"must be an automatic judge (kind {', '.join(AUTOMATIC_KINDS)}), got {str(v.get('kind'))[:40]!r}"
        )
    if isinstance(v, dict) and v.get("kind") == JudgeKind.LLM.value:
        return _fixed_orders(v, "")
    return v


#: The smallest fixed human rate: the per-duel estimate's range grows as 1/human_rate (docs/algorithms.md,
#: (H2)), so a smaller rate leaves the certificate out of reach, and near 0 it overflows to NaN.
MIN_HUMAN_RATE = 0.01


def _human_rate(v: Any) -> Any:
    if v == "active":
        return v
    x = None if isinstance(v, (bool, str)) else finite_number(v)
    if x is None or not MIN_HUMAN_RATE <= x <= 1.0:
        raise ValueError(
            f'must be a number in [{MIN_HUMAN_RATE:g}, 1] or "active", got {str(v)[:40]!r} (the range of the '
            "per-duel estimate grows as 1/human_rate)"
        )
    return x


class HybridHumanConfig(_Config):
    """The human side of a hybrid judge: what one vote costs, what annotators read."""

    fee_per_vote: Annotated[float, money("USD paid per human vote")] = Field(
        0.0,
        ge=0,
        le=MAX_QUERY_USD,
        description="USD paid to an annotator per recorded vote: reserved when a duel is selected for a human, "
        "charged only when the vote is recorded.",
        examples=[0.05],
    )
    guidelines: str | None = Field(None, max_length=20_000, description="Shown above every duel (Markdown).")


class HybridJudgeConfig(_Config):
    """An automatic judge on every duel, annotators on a random fraction (docs/clients-and-judges.md, Hybrid)."""

    kind: Literal["hybrid"] = Field(description="Human votes amplified by an automatic judge.")
    llm: Annotated[
        Annotated[SimulatedJudgeConfig | LLMJudgeConfig | JuryJudgeConfig, Field(discriminator="kind")],
        BeforeValidator(_automatic),
    ] = Field(description="The automatic judge of every duel: an llm, jury or simulated judge config.")
    human: HybridHumanConfig = Field(default_factory=HybridHumanConfig, description="The annotators' side.")
    human_rate: Annotated[float | Literal["active"], BeforeValidator(_human_rate)] = Field(
        0.2,
        description='The probability that a duel goes to a human: a number in [0.01, 1], or "active" (higher '
        "when the judge is unsure, at least 0.1).",
    )


JudgeConfig = Annotated[
    HumanJudgeConfig | SimulatedJudgeConfig | LLMJudgeConfig | JuryJudgeConfig | HybridJudgeConfig,
    Field(discriminator="kind"),
]
AnyJudgeConfig = HumanJudgeConfig | SimulatedJudgeConfig | LLMJudgeConfig | JuryJudgeConfig | HybridJudgeConfig
_JUDGE_ADAPTER: TypeAdapter[AnyJudgeConfig] = TypeAdapter(JudgeConfig)


def check_judge_size(cfg: AnyJudgeConfig, n_models: int) -> None:
    """A simulated judge's matrix must have the campaign's number of models (ValueError)."""
    if isinstance(cfg, HybridJudgeConfig):
        cfg = cfg.llm
    if isinstance(cfg, SimulatedJudgeConfig) and len(cfg.preference) != n_models:
        n = len(cfg.preference)
        raise ValueError(f"judge.preference: is {n}x{n} but the campaign has {n_models} models")


def parse_judge_config(cfg: Any, n_models: int | None = None) -> AnyJudgeConfig:
    """A judge config (dict, e.g. a stored row) as its validated model.

    ``n_models`` (when given) is the number of models of the campaign; a
    simulated judge's matrix must have that size. Raises ``ValueError`` with one
    line naming the field.
    """
    if isinstance(cfg, BaseModel):
        out = cfg
    elif not isinstance(cfg, dict):
        raise ValueError("judge: must be an object with a 'kind' field")
    else:
        try:
            out = _JUDGE_ADAPTER.validate_python(cfg)
        except ValidationError as exc:
            raise ValueError(format_validation_error(exc, "judge")) from None
    if n_models is not None:
        check_judge_size(out, n_models)  # type: ignore[arg-type]
    return out  # type: ignore[return-value]


def judge_json(cfg: AnyJudgeConfig) -> dict[str, Any]:
    """What the database stores for a judge config (every default filled in; a human judge
    without guidelines is stored as before they existed)."""
    out = cfg.model_dump(mode="json")
    if out.get("kind") == JudgeKind.HUMAN and out.get("guidelines") is None:
        out.pop("guidelines", None)
    _drop_default_probabilities(out)
    return out


def _drop_default_probabilities(judge: dict[str, Any]) -> None:
    """An LLM judge without ``verdict_probabilities`` is stored as before the option existed (its own
    config, a jury's jurors, a hybrid's automatic judge)."""
    if judge.get("verdict_probabilities") is False:
        judge.pop("verdict_probabilities")
    for j in judge.get("judges") or []:
        if isinstance(j, dict):
            _drop_default_probabilities(j)
    if isinstance(judge.get("llm"), dict):
        _drop_default_probabilities(judge["llm"])


def validate_judge_config(cfg: Any, n_models: int | None = None) -> dict[str, Any]:
    """Check a judge config and return its stored JSON form: ``judge_json(parse_judge_config(...))``."""
    return judge_json(parse_judge_config(cfg, n_models))


def build_judge(
    cfg: AnyJudgeConfig,
    model_names: list[str],
    tie_policy: str = "drop",
    http: Any = None,
    **options: Any,
) -> Judge:
    """Build a judge for a campaign with models ``model_names`` from its validated config.

    ``cfg`` is a model of :data:`JudgeConfig` (:func:`parse_judge_config` turns a
    dict into one). ``http`` is an optional shared ``httpx.AsyncClient`` for an LLM
    judge's model client; ``options`` (``limiter``, the shared rate limiter; ``sleep``, ``rng`` for tests) are
    passed to that client, except ``images``: a loader of the image store's blind copies
    (:class:`service.images.judge.VisionJudgeClient`), with which the judge sees the images it is shown.
    """
    if tie_policy not in TIE_POLICIES:
        raise ValueError(f"tie_policy: must be one of {list(TIE_POLICIES)}, got {tie_policy!r}")
    if not isinstance(cfg, BaseModel):
        raise TypeError(f"build_judge needs a validated judge config (parse_judge_config), got {type(cfg).__name__}")
    check_judge_size(cfg, len(model_names))
    if isinstance(cfg, HybridJudgeConfig):  # the duel's automatic verdict (the human side votes on the page)
        return build_judge(cfg.llm, model_names, tie_policy, http, **options)
    data = judge_json(cfg)
    if isinstance(cfg, HumanJudgeConfig):
        return HumanJudge(data, model_names, tie_policy)
    if isinstance(cfg, SimulatedJudgeConfig):
        return SimulatedJudge(data, model_names, tie_policy)
    if isinstance(cfg, JuryJudgeConfig):
        jurors = [_llm_judge(j, model_names, tie_policy, http=http, options=options) for j in cfg.judges]
        return JuryJudge(data, model_names, tie_policy, jurors=jurors, names=cfg.juror_names())
    assert isinstance(cfg, LLMJudgeConfig)
    return _llm_judge(cfg, model_names, tie_policy, http=http, options=options)


#: What a judge with ``verdict_probabilities`` adds to its client's params, per provider (Anthropic's
#: Messages API returns no log probabilities: nothing to ask, the verdict is scored by its label).
#: OpenAI "Create chat completion": ``logprobs``, ``top_logprobs`` (0 to 20); Gemini ``GenerationConfig``:
#: ``responseLogprobs``, ``logprobs`` (the number of top candidates per step).
LOGPROB_TOP = 5
LOGPROB_PARAMS: dict[str, dict[str, Any]] = {
    "openai": {"logprobs": True, "top_logprobs": LOGPROB_TOP},
    "gemini": {"responseLogprobs": True, "logprobs": LOGPROB_TOP},
}


def _llm_judge(cfg: LLMJudgeConfig, model_names: list[str], tie_policy: str, *, http: Any, options: dict) -> LLMJudge:
    client_cfg = cfg.client
    if cfg.system_prompt is not None:
        client_cfg = client_cfg.model_copy(update={"system": cfg.system_prompt})
    if cfg.verdict_probabilities:  # ask for the verdict tokens' log probabilities (a key the config sets wins)
        ask = LOGPROB_PARAMS.get(client_cfg.kind, {})
        client_cfg = client_cfg.model_copy(update={"params": {**ask, **client_cfg.params}})
    options = dict(options)
    images = options.pop("images", None)  # a loader of blind copies: the judge sees the images it is shown
    client: Any = build_client(client_cfg, model_name="judge", fixed_cost=cfg.cost, http=http, **options)
    if images is not None and client_cfg.kind != "simulated":
        from service.images.judge import VisionJudgeClient

        client = VisionJudgeClient(client, images)
    return LLMJudge(
        judge_json(cfg),
        model_names,
        tie_policy,
        client=client,
        template=cfg.template(),
        verdict=cfg.verdict_rule(),
        combine=cfg.combine,
        probabilities=cfg.verdict_probabilities,
    )
