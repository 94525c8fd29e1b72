"""A running llmduel server, seen from the command line: the Python client (service/client.py).

Every command that talks to a server (``llmduel campaign ...``, ``llmduel annotator ...``)
adds the same options with :func:`add_remote_arguments` and opens a :class:`Remote` (the
client, with errors as :class:`CLIError`) with :func:`remote_from_args`. The server's URL comes from ``--url``, else
``LLMDUEL_URL``, else ``http://127.0.0.1:8000``; the admin key from ``--key``, else
``LLMDUEL_API_KEY``. Any failure (connection refused, a 4xx/5xx answer, a body that
is not JSON) becomes a one-line :class:`~service.cli.args.CLIError` that names the
server's own message; the key never appears in it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from service.cli.args import CLIError
from service.client import DEFAULT_URL, APIError, Client


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


class Remote(Client):
    """The :class:`service.client.Client` of the command line: a refused or failed request is a
    one-line :class:`CLIError` (exit 2) instead of an :class:`APIError`."""

    def __init__(self, url: str, key: str | None, *, timeout: float = 30.0, transport: Any = None):
        if not url.rstrip("/").startswith(("http://", "https://")):
            raise CLIError(f"--url must start with http:// or https://, got {url!r}")
        super().__init__(url, key or "", timeout=timeout, transport=transport)

    def request(self, method: str, path: str, *, idempotency_key: str | None = None, **kwargs: Any) -> Any:
        try:
            return super().request(method, path, idempotency_key=idempotency_key, **kwargs)
        except APIError as exc:
            raise CLIError(exc.message) from None


def remote_from_args(args: argparse.Namespace) -> Remote:
    """The :class:`Remote` named by ``--url``/``--key`` or the environment."""
    url = args.url or os.environ.get("LLMDUEL_URL") or DEFAULT_URL
    key = args.key or os.environ.get("LLMDUEL_API_KEY") or None
    return Remote(url, key, timeout=args.timeout)
