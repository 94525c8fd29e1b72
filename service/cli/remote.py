"""A running llmduel server, seen from the command line: one small REST client.

Every command that talks to a server (``llmduel campaign ...``, ``llmduel annotator ...``)
adds the same options with :func:`add_remote_arguments` and opens a :class:`Remote`
with :func:`remote_from_args`. The server's URL comes from ``--url``, else
``LLMDUEL_URL``, else ``http://127.0.0.1:8000``; the admin key from ``--key``, else
``LLMDUEL_API_KEY``. Any failure (connection refused, a 4xx/5xx answer, a body that
is not JSON) becomes a one-line :class:`~service.cli.args.CLIError` that names the
server's own message; the key never appears in it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import httpx

from service.cli.args import CLIError

DEFAULT_URL = "http://127.0.0.1:8000"


def add_remote_arguments(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--key`` (defaults from ``LLMDUEL_URL`` and ``LLMDUEL_API_KEY``)."""
    parser.add_argument(
        "--url",
        default=None,
        help=f"the server's base URL (default: LLMDUEL_URL, else {DEFAULT_URL})",
    )
    parser.add_argument(
        "--key",
        default=None,
        help="the admin key (default: LLMDUEL_API_KEY); prefer the variable, a flag shows in `ps`",
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")


class Remote:
    """Blocking JSON calls to one llmduel server, authenticated as admin."""

    def __init__(self, url: str, key: str | None, *, timeout: float = 30.0, transport: Any = None):
        self.url = url.rstrip("/")
        if not self.url.startswith(("http://", "https://")):
            raise CLIError(f"--url must start with http:// or https://, got {url!r}")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Remote:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Send one request; the decoded JSON body (None for 204), or a CLIError."""
        try:
            resp = self._client.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise CLIError(f"{self.url} did not answer {method} {path} in time") from None
        except httpx.HTTPError as exc:
            raise CLIError(f"cannot reach {self.url}: {type(exc).__name__}: {exc}".rstrip(": ")) from None
        if resp.status_code >= 400:
            raise CLIError(f"{method} {path}: HTTP {resp.status_code}: {_message(resp)}")
        if resp.status_code == 204 or not resp.content:
            return None
        try:
            return resp.json()
        except ValueError:
            raise CLIError(f"{method} {path}: the server answered something that is not JSON") from None

    def get(self, path: str, **kwargs: Any) -> Any:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> Any:
        return self.request("POST", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> Any:
        return self.request("PATCH", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Any:
        return self.request("DELETE", path, **kwargs)


def _message(resp: httpx.Response) -> str:
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


def remote_from_args(args: argparse.Namespace) -> Remote:
    """The :class:`Remote` named by ``--url``/``--key`` or the environment."""
    url = args.url or os.environ.get("LLMDUEL_URL") or DEFAULT_URL
    key = args.key or os.environ.get("LLMDUEL_API_KEY") or None
    return Remote(url, key, timeout=args.timeout)
