"""Credentials never reach the logs: a filter on uvicorn's access log.

The service takes no credential in an address (the admin key comes in a header or
the ``/login`` form body), but a client may still put one there
(``/?key=...``, ``?access_token=...``), and an annotator's voting link carries its
token in the path (``/annotate/<token>``). :class:`RedactCredentials` rewrites each
access-log line before it is formatted:

* the value of every query parameter whose name contains ``key``, ``token``,
  ``secret``, ``password``, ``auth``, ``session``, ``sig`` or ``code`` becomes ``***``;
* the token segment of ``/annotate/<token>/...`` becomes ``***``.

It also filters httpx's INFO line of each request the server sends to a model or a
webhook (``HTTP Request: POST <url> ...``), whose address may carry ``?key=``.

**choice**: the voting-link token is masked in the access log like any other
credential; the log still shows that an annotator page was used, and the
dashboards show which annotator did what by label.
"""

from __future__ import annotations

import logging
import re

MASK = "***"

_QUERY_SECRET = re.compile(r"(?i)([?&;][^=&#\s]*(?:key|token|secret|passw|auth|session|sig|code)[^=&#\s]*=)[^&#\s]*")
_ANNOTATE = re.compile(r"(/annotate/)[^/?#\s]+")

#: uvicorn's access log, and httpx's INFO line of every request the server sends (a model's
#: ``base_url`` or a ``webhook_url`` may carry ``?key=``, as Gemini's addresses do)
ACCESS_LOGGERS = ("uvicorn.access", "httpx")


def redact(text: str) -> str:
    """``text`` with credential-like query values and annotator tokens masked."""
    if "=" in text:
        text = _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, text)
    if "/annotate/" in text:
        text = _ANNOTATE.sub(lambda m: m.group(1) + MASK, text)
    return text


def _masked(arg: object) -> object:
    """A log argument with credentials masked: text, and objects that print as an address (httpx's ``URL``)."""
    if isinstance(arg, str):
        return redact(arg)
    if isinstance(arg, (int, float, bytes)) or arg is None:
        return arg
    text = str(arg)
    masked = redact(text)
    return masked if masked != text else arg


class RedactCredentials(logging.Filter):
    """Mask credentials in a record's message and string arguments (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        return True


def install() -> None:
    """Attach the filter to the access loggers (idempotent; call after logging is configured too)."""
    for name in ACCESS_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactCredentials) for f in logger.filters):
            logger.addFilter(RedactCredentials())
