"""A campaign's ``judge`` config: its validation, and :func:`build_judge`, which builds the judge
(and an LLM judge's model client, given to the judge; judges/ never imports the service)."""

from __future__ import annotations

from typing import Any

from algorithms.vocabulary import JudgeKind
from judges import TIE_POLICIES, HumanJudge, Judge, LLMJudge, SimulatedJudge
from service.clients import build_client
from service.clients.config import finite_number, validate_client_config

JUDGE_KINDS: tuple[str, ...] = tuple(k.value for k in JudgeKind)
PREFERENCE_TOL = 1e-6


def _err(field: str, msg: str) -> ValueError:
    return ValueError(f"judge.{field}: {msg}")


def _validate_preference(p: Any, n_models: int | None) -> list[list[float]]:
    if not isinstance(p, list) or not p:
        raise _err("preference", "is required: a square matrix (list of rows) in the order of the models")
    n = len(p)
    if n < 2:
        raise _err("preference", "needs at least 2 models")
    for i, row in enumerate(p):
        if not isinstance(row, list) or len(row) != n:
            raise _err(
                "preference",
                f"must be square: row {i} has {len(row) if isinstance(row, list) else 'no'} entries, expected {n}",
            )
    if n_models is not None and n != n_models:
        raise _err("preference", f"is {n}x{n} but the campaign has {n_models} models")
    out = []
    for i, row in enumerate(p):
        r = []
        for j, x in enumerate(row):
            v = finite_number(x)
            if v is None:
                raise _err(f"preference[{i}][{j}]", "must be a number")
            if not 0.0 <= v <= 1.0:
                raise _err(f"preference[{i}][{j}]", f"must be in [0, 1], got {v}")
            r.append(v)
        out.append(r)
    for i in range(n):
        for j in range(i + 1, n):
            if abs(out[i][j] + out[j][i] - 1.0) > PREFERENCE_TOL:
                raise _err(
                    "preference",
                    f"p[{i}][{j}] + p[{j}][{i}] must equal 1 (got {out[i][j]} + {out[j][i]})",
                )
    return out


def validate_judge_config(cfg: Any, n_models: int | None = None) -> dict[str, Any]:
    """Check a judge config and return it normalised (a new dict).

    ``n_models`` (when given) is the number of models of the campaign; a
    simulated judge's matrix must have that size. Raises ``ValueError`` naming
    the field.
    """
    if not isinstance(cfg, dict):
        raise ValueError("judge: must be an object with a 'kind' field")
    kind = cfg.get("kind")
    if kind not in JUDGE_KINDS:
        raise _err("kind", f"must be one of {list(JUDGE_KINDS)}, got {kind!r}")
    allowed = {
        "human": {"kind"},
        "simulated": {"kind", "preference", "tie_prob"},
        "llm": {"kind", "client", "cost", "both_orders"},
    }[kind]
    unknown = set(cfg) - allowed
    if unknown:
        raise _err(sorted(unknown)[0], f"unknown field for judge kind {kind!r} (allowed: {sorted(allowed)})")

    if kind == "human":
        return {"kind": "human"}

    if kind == "simulated":
        tie = finite_number(cfg.get("tie_prob", 0.0))
        if tie is None or not 0.0 <= tie < 1.0:
            raise _err("tie_prob", f"must be a number in [0, 1), got {str(cfg.get('tie_prob'))[:40]}")
        return {
            "kind": "simulated",
            "preference": _validate_preference(cfg.get("preference"), n_models),
            "tie_prob": float(tie),
        }

    # llm
    client = cfg.get("client")
    if not isinstance(client, dict):
        raise _err("client", 'is required: the judge model\'s client config, e.g. {"kind": "openai", ...}')
    if client.get("kind") == "simulated":
        raise _err("client.kind", "a simulated client cannot judge; use the judge kind 'simulated'")
    try:
        client_cfg = validate_client_config(client)
    except ValueError as exc:
        raise ValueError(f"judge.{exc}") from None
    cost = finite_number(cfg.get("cost", 0.0))
    if cost is None or cost < 0:
        raise _err("cost", "must be a non-negative number (USD per judge call when the client has no price)")
    both = cfg.get("both_orders", True)
    if not isinstance(both, bool):
        raise _err("both_orders", "must be true or false")
    return {"kind": "llm", "client": client_cfg, "cost": float(cost), "both_orders": both}


def build_judge(
    cfg: dict[str, Any],
    model_names: list[str],
    tie_policy: str = "drop",
    http: Any = None,
    **options: Any,
) -> Judge:
    """Build a judge for a campaign with models ``model_names``.

    ``cfg`` is validated with :func:`validate_judge_config`. ``http`` is an
    optional shared ``httpx.AsyncClient`` for an LLM judge's model client;
    ``options`` (``sleep``, ``rng``) are passed to that client (tests).
    """
    if tie_policy not in TIE_POLICIES:
        raise ValueError(f"tie_policy: must be one of {list(TIE_POLICIES)}, got {tie_policy!r}")
    cfg = validate_judge_config(cfg, n_models=len(model_names))
    kind = cfg["kind"]
    if kind == "human":
        return HumanJudge(cfg, model_names, tie_policy)
    if kind == "simulated":
        return SimulatedJudge(cfg, model_names, tie_policy)
    client = build_client(cfg["client"], model_name="judge", fixed_cost=cfg.get("cost", 0.0), http=http, **options)
    return LLMJudge(cfg, model_names, tie_policy, client=client)
