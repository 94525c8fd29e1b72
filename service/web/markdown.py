"""Safe Markdown for model output and prompts.

Two layers: markdown-it-py with raw HTML disabled (any ``<script>`` or
``<img onerror>`` in the text comes out as escaped text) and no images (no
external requests from a model's answer), then nh3 with a short allow-list of
tags and attributes, so nothing executable can reach the page even if the
renderer had a bug. Links keep only http(s)/mailto targets and get
``rel="noopener noreferrer nofollow"``.
"""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

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
    md.validateLink = _link_allowed
    return md


_MD = _make_renderer()


def render_markdown(text: str | None) -> Markup:
    """``text`` as sanitised HTML (a :class:`Markup`, safe to insert into a template)."""
    html = _MD.render(text or "")
    clean = nh3.clean(
        html,
        tags=ALLOWED_TAGS,
        attributes=ALLOWED_ATTRIBUTES,
        url_schemes=URL_SCHEMES,
        link_rel="noopener noreferrer nofollow",
        strip_comments=True,
    )
    return Markup(clean)
