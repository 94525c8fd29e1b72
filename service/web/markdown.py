"""Safe Markdown for model output and prompts.

Two layers: markdown-it-py with raw HTML disabled (any ``<script>`` or
``<img onerror>`` in the text comes out as escaped text) and no images (no
external requests from a model's answer), then nh3 with a short allow-list of
tags and attributes, so nothing executable can reach the page even if the
renderer had a bug. Links keep only http(s)/mailto targets and get
``rel="noopener noreferrer nofollow"``.

Bounded whatever the text: only the first :data:`MARKDOWN_MAX_CHARS` characters are
rendered as Markdown (the renderer costs about 15 to 20 microseconds per character of
hostile input such as a megabyte of ``[``), the rest up to :data:`SHOWN_MAX_CHARS`
is shown as escaped plain text, and what lies beyond is counted, not shown. The
rendered part is cached per text, and the pages render off the event loop
(``service/web/routes.py``).
"""

from __future__ import annotations

import functools

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup, escape

#: characters of a text rendered as Markdown; the rest is shown as plain text
MARKDOWN_MAX_CHARS = 20_000
#: characters of a text shown at all; beyond, the page says how many were left out
SHOWN_MAX_CHARS = 200_000

ALLOWED_TAGS = {
    "p",
    "br",
    "hr",
    "em",
    "strong",
    "s",
    "del",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "a",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
}
ALLOWED_ATTRIBUTES = {
    "a": {"href", "title"},
    "ol": {"start"},
}
URL_SCHEMES = {"http", "https", "mailto"}


def _link_allowed(url: str) -> bool:
    """Only http(s), mailto and relative targets become links; anything else, such as the
    fake provider's ``<<fake:...>>`` marker (an autolink to a made-up scheme), stays text."""
    scheme, sep, _ = url.partition(":")
    if not sep or "/" in scheme or "?" in scheme or "#" in scheme:
        return True  # no scheme: a relative link (nh3 still checks it)
    return scheme.strip().lower() in URL_SCHEMES


def _make_renderer() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False, "breaks": True})
    md.enable(["table", "strikethrough"])
    md.disable("image")
    # markdown-it-py's hook for link checks is replacing this method on the instance (its docs' way)
    md.validateLink = _link_allowed  # type: ignore[method-assign]
    return md


_MD = _make_renderer()


def _split(text: str) -> tuple[str, str, int]:
    """(Markdown part, plain-text part, characters left out): the Markdown part ends at a line end
    when one lies in the last quarter of :data:`MARKDOWN_MAX_CHARS`."""
    if len(text) <= MARKDOWN_MAX_CHARS:
        return text, "", 0
    cut = text.rfind("\n", 3 * MARKDOWN_MAX_CHARS // 4, MARKDOWN_MAX_CHARS)
    cut = cut + 1 if cut >= 0 else MARKDOWN_MAX_CHARS
    shown = text[:SHOWN_MAX_CHARS]
    return shown[:cut], shown[cut:], len(text) - len(shown)


def render_markdown(text: str | None) -> Markup:
    """``text`` as sanitised HTML (a :class:`Markup`, safe to insert into a template), in time and
    size bounded whatever the text (see the module's docstring)."""
    head, rest, left_out = _split(text or "")
    html = _render_bounded(head)
    if rest:
        html += f'<pre class="md-rest">{escape(rest)}</pre>'
    if left_out:
        html += f'<p class="md-cut">{left_out:,} more characters not shown.</p>'
    return Markup(html)


@functools.lru_cache(maxsize=128)
def _render_bounded(text: str) -> str:
    html = _MD.render(text)
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return clean
