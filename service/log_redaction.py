"""Credentials never reach the logs: a filter on uvicorn's access log.

The service takes no credential in an address (the admin key comes in a header or
the ``/login`` form body), but a client may still put one there
(``/?key=...``, ``?access_token=...``), and an annotator's voting link carries its
token in the path (``/annotate/<token>``). :class:`RedactCredentials` rewrites each
access-log line before it is formatted:

* the value of every query parameter whose name contains ``key``, ``token``,
  ``secret``, ``password``, ``auth``, ``session``, ``sig`` or ``code`` becomes ``***``;
* the token segment of ``/annotate/<token>/...`` becomes ``***``.

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

ACCESS_LOGGERS = ("uvicorn.access",)


def redact(text: str) -> str:
    """``text`` with credential-like query values and annotator tokens masked."""
    if "=" in text:
        text = _QUERY_SECRET.sub(lambda m: m.group(1) + MASK, text)
    if "/annotate/" in text:
        text = _ANNOTATE.sub(lambda m: m.group(1) + MASK, text)
    return text


class RedactCredentials(logging.Filter):
    """Mask credentials in a record's message and string arguments (never drops a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        return True


def install() -> None:
    """Attach the filter to the access loggers (idempotent; call after logging is configured too)."""
    for name in ACCESS_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactCredentials) for f in logger.filters):
            logger.addFilter(RedactCredentials())
