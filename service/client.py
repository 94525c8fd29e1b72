"""A Python client for llmduel's REST API (the one the ``llmduel`` command line uses).

::

    from service.client import Client

    with Client("http://127.0.0.1:8000", api_key="...") as llm:  # or LLMDUEL_URL / LLMDUEL_API_KEY
        c = llm.create_campaign(body)          # the body of POST /v1/campaigns (a dict)
        llm.start_run(c["id"], concurrency=4)
        done = llm.wait(c["id"])               # polls until the campaign ends
        print(done["verdict"])
        files = llm.export(c["id"])            # {"certificate.json": text, ...}

Every method is one request (``wait`` polls) and returns the decoded JSON of the answer, as
documented in docs/service.md. A refused request raises :class:`APIError` with the HTTP status
and the server's message on one line; a server that cannot be reached raises :class:`APIError`
with ``status_code`` None. The key is sent as a Bearer token and never appears in an error.

Every POST and PATCH carries an ``Idempotency-Key`` header (a fresh UUID per call, or the caller's own
``idempotency_key``), and is sent again with the same key after a network error (a refused or
dropped connection, not a time-out; up to :data:`RETRIES` tries): the server answers the repeat from the first one, so a retried
call never creates or pays for anything twice (docs/service.md, *Idempotency keys*).
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any, Literal, Self
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
ENDED = frozenset({"certified", "no_condorcet_winner", "undecidable", "budget_exhausted", "stopped"})

JSON = dict[str, Any]
#: Tries of a POST or PATCH (its Idempotency-Key unchanged) after a network error.
RETRIES = 3
RETRY_DELAY_S = 0.5


class APIError(Exception):
    """A request the server refused (``status_code``: its HTTP status) or could not be sent (None)."""

    def __init__(self, message: str, status_code: int | None = None):
        super().__init__(message)
        self.message = message
        self.status_code = status_code


def error_message(resp: httpx.Response) -> str:
    """The server's error message (the API answers ``{"detail": ...}``), on one line."""
    try:
        body = resp.json()
    except ValueError:
        lines = resp.text.strip().splitlines()
        return lines[0][:300] if lines else resp.reason_phrase
    detail = body.get("detail", body) if isinstance(body, dict) else body
    if isinstance(detail, list):  # FastAPI validation errors: [{"loc": [...], "msg": ...}, ...]
        parts = []
        for item in detail[:3]:
            if isinstance(item, dict):
                loc = ".".join(str(x) for x in item.get("loc", []) if x != "body")
                parts.append(f"{loc}: {item.get('msg', '')}" if loc else str(item.get("msg", "")))
        detail = "; ".join(parts) or str(detail)
    return " ".join(str(detail).split())[:500]


class Client:
    """Blocking JSON calls to one llmduel server, authenticated with the admin key (or an annotator token)."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ):
        url = url or os.environ.get("LLMDUEL_URL") or DEFAULT_URL
        self.url = url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"the server URL must start with http:// or https://, got {url!r}")
        key = api_key if api_key is not None else os.environ.get("LLMDUEL_API_KEY") or None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    # ------------------------------------------------------------ plumbing
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, idempotency_key: str | None = None, **kwargs: Any) -> Any:
        """Send one request; the decoded JSON body (None for 204), or :class:`APIError`."""
        keyed = method in ("POST", "PATCH")
        if keyed:
            kwargs["headers"] = {**kwargs.get("headers", {}), "Idempotency-Key": idempotency_key or str(uuid.uuid4())}
        attempt = 0
        while True:
            attempt += 1
            try:
                resp = self._http.request(method, path, **kwargs)
            except httpx.HTTPError as exc:
                # a keyed request is safe to send again: the server answers a repeat from the first one
                lost = isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)
                if keyed and attempt < RETRIES and lost:  # a time-out is not retried: it waited its whole timeout
                    time.sleep(RETRY_DELAY_S * attempt)
                    continue
                if isinstance(exc, httpx.TimeoutException):
                    raise APIError(f"{self.url} did not answer {method} {path} in time") from None
                raise APIError(f"cannot reach {self.url}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
            if keyed and resp.status_code == 409 and "still under way" in resp.text and attempt < RETRIES:
                time.sleep(RETRY_DELAY_S * attempt)  # our own first try is still running on the server
                continue
            break
        if resp.status_code >= 400:
            raise APIError(f"{method} {path}: HTTP {resp.status_code}: {error_message(resp)}", resp.status_code)
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise APIError(
                f"{method} {path}: the server answered something that is not JSON", resp.status_code
            ) from None

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.request("POST", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> Any:
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.request("DELETE", path, **kwargs)

    # ------------------------------------------------------------ campaigns
    def create_campaign(self, body: JSON, *, idempotency_key: str | None = None) -> JSON:
        """``POST /v1/campaigns``: the campaign (with ``webhook_secret`` once, when it has a webhook)."""
        return self.post("/v1/campaigns", json=body, idempotency_key=idempotency_key)

    def campaign(self, campaign_id: int) -> JSON:
        """``GET /v1/campaigns/{id}``: status, statistics, spend, verdict."""
        return self.get(f"/v1/campaigns/{int(campaign_id)}")

    def list_campaigns(
        self, *, status: str | None = None, limit: int = 50, offset: int = 0, archived: bool = False
    ) -> JSON:
        """``GET /v1/campaigns``: a page ``{"items", "total", "next_offset", ...}``, newest first."""
        params: dict[str, Any] = {"limit": limit, "offset": offset}
        if status is not None:
            params["status"] = status
        if archived:
            params["archived"] = "true"
        return self.get("/v1/campaigns", params=params)

    def start_run(self, campaign_id: int, *, concurrency: int = 1, max_duels: int | None = None) -> JSON:
        """``POST /v1/campaigns/{id}/run``: start the background run."""
        body: dict[str, Any] = {"concurrency": concurrency}
        if max_duels is not None:
            body["max_duels"] = max_duels
        return self.post(f"/v1/campaigns/{int(campaign_id)}/run", json=body)

    def resume(self, campaign_id: int, *, concurrency: int | None = None) -> JSON:
        """``POST /v1/campaigns/{id}/resume``: restart a paused or failed run with its own limits."""
        body = {"concurrency": concurrency} if concurrency is not None else None
        return self.post(f"/v1/campaigns/{int(campaign_id)}/resume", json=body)

    def stop(self, campaign_id: int) -> JSON:
        """``POST /v1/campaigns/{id}/stop``."""
        return self.post(f"/v1/campaigns/{int(campaign_id)}/stop")

    def continue_campaign(self, campaign_id: int, *, budget: float | None = None, max_duels: int | None = None) -> JSON:
        """``PATCH /v1/campaigns/{id}``: raise the budget or the duel cap (an ended campaign continues)."""
        patch: dict[str, Any] = {}
        if budget is not None:
            patch["budget"] = budget
        if max_duels is not None:
            patch["max_duels"] = max_duels
        return self.patch(f"/v1/campaigns/{int(campaign_id)}", json=patch)

    def wait(self, campaign_id: int, *, interval: float = 1.0, timeout: float | None = None) -> JSON:
        """Poll the campaign until it has ended and nothing is in flight; its last view.
        Raises TimeoutError after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            c = self.campaign(campaign_id)
            if c["status"] in ENDED and not c.get("pending"):
                return c
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"campaign {campaign_id} is still {c['status']} after {timeout:g} s")
            time.sleep(interval)

    def disable_model(self, campaign_id: int, name: str, *, reason: str | None = None, resume: bool = True) -> JSON:
        """``POST /v1/campaigns/{id}/models/{name}/disable``: the campaign goes on without the model
        (``{"campaign_id", "change", "run", "campaign"}``; docs/guide.md, A failing model)."""
        body: dict[str, Any] = {"resume": resume}
        if reason is not None:
            body["reason"] = reason
        return self.post(f"/v1/campaigns/{int(campaign_id)}/models/{quote(name, safe='')}/disable", json=body)

    def replace_model(
        self, campaign_id: int, name: str, model: dict[str, Any], *, reason: str | None = None, resume: bool = True
    ) -> JSON:
        """``POST /v1/campaigns/{id}/models/{name}/replace``: ``model`` (as in a campaign's ``models``) takes
        the place of ``name``, with no evidence yet."""
        body: dict[str, Any] = {"model": model, "resume": resume}
        if reason is not None:
            body["reason"] = reason
        return self.post(f"/v1/campaigns/{int(campaign_id)}/models/{quote(name, safe='')}/replace", json=body)

    def archive(self, campaign_id: int, archived: bool = True) -> JSON:
        """``POST /v1/campaigns/{id}/archive`` (or ``unarchive`` with ``archived=False``)."""
        return self.post(f"/v1/campaigns/{int(campaign_id)}/{'archive' if archived else 'unarchive'}")

    def delete_campaign(self, campaign_id: int, *, stored: Literal["keep", "remove"] = "keep") -> JSON:
        """``DELETE /v1/campaigns/{id}``: an ended campaign and its rows."""
        return self.delete(f"/v1/campaigns/{int(campaign_id)}", params={"stored": stored})

    # ------------------------------------------------------------ results
    def export(self, campaign_id: int) -> dict[str, str]:
        """``GET /v1/campaigns/{id}/export``: file name -> text."""
        return self.get(f"/v1/campaigns/{int(campaign_id)}/export")["files"]

    def judge_bias(self, campaign_id: int) -> JSON:
        """``GET /v1/campaigns/{id}/judge-bias``."""
        return self.get(f"/v1/campaigns/{int(campaign_id)}/judge-bias")

    def style(self, campaign_id: int) -> JSON:
        """``GET /v1/campaigns/{id}/style``: the ranking with style held fixed, beside the raw one."""
        return self.get(f"/v1/campaigns/{int(campaign_id)}/style")

    def replay(self, campaign_id: int) -> JSON:
        """``GET /v1/campaigns/{id}/replay``: does the stored state match the duel log?"""
        return self.get(f"/v1/campaigns/{int(campaign_id)}/replay")

    def forecast(self, body: JSON, *, trials: int | None = None, timeout: float = 300.0) -> JSON:
        """``POST /v1/campaigns/forecast``: the cost to certify a campaign body, before creating it."""
        params = {"trials": trials} if trials is not None else None
        return self.post("/v1/campaigns/forecast", json=body, params=params, timeout=timeout)

    def pilot_forecast(
        self, campaign_id: int, *, trials: int | None = None, spread: float | None = None, timeout: float = 300.0
    ) -> JSON:
        """``POST /v1/campaigns/{id}/forecast``: the forecast from the campaign's duels so far."""
        body = {k: v for k, v in (("trials", trials), ("spread", spread)) if v is not None}
        return self.post(f"/v1/campaigns/{int(campaign_id)}/forecast", json=body, timeout=timeout)

    def import_answers(self, campaign_id: int, model: str, answers: list[tuple[str, str]]) -> JSON:
        """``POST /v1/campaigns/{id}/answers``: (question id, text) pairs into the answer store, uncharged."""
        body = {"model": model, "answers": [{"question_id": q, "text": t} for q, t in answers]}
        return self.post(f"/v1/campaigns/{int(campaign_id)}/answers", json=body)

    # ------------------------------------------------------------ duels and annotators
    def next_duel(self, campaign_id: int) -> JSON:
        """``POST /v1/campaigns/{id}/duels``: the caller's next duel (an annotator's own, or a new one)."""
        return self.post(f"/v1/campaigns/{int(campaign_id)}/duels")

    def duel(self, duel_id: int, *, charges: bool = False) -> JSON:
        """``GET /v1/duels/{id}``."""
        return self.get(f"/v1/duels/{int(duel_id)}", params={"charges": "true"} if charges else None)

    def vote(self, duel_id: int, choice: Literal["a", "b", "tie", "both_bad"], comment: str | None = None) -> JSON:
        """``POST /v1/duels/{id}/vote``."""
        body: dict[str, Any] = {"choice": choice}
        if comment is not None:
            body["comment"] = comment
        return self.post(f"/v1/duels/{int(duel_id)}/vote", json=body)

    def add_annotator(self, campaign_id: int, label: str | None = None) -> JSON:
        """``POST /v1/campaigns/{id}/annotators``: its token and voting link (shown once)."""
        return self.post(f"/v1/campaigns/{int(campaign_id)}/annotators", json={"label": label} if label else None)

    def annotators(self, campaign_id: int) -> list[JSON]:
        """``GET /v1/campaigns/{id}/annotators``: votes, agreement, skips."""
        return self.get(f"/v1/campaigns/{int(campaign_id)}/annotators")
