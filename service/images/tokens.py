"""What an image costs as model input: the providers' published per-image token rules.

The budget reserves an upper bound of every call before it is made
(:func:`service.money.bounds.model_bound_nusd`); a prompt's images are input tokens too, so
the bound counts them with the rule of the model's provider (docs/guide.md, *Image campaigns*,
which cites the providers' pages). Each rule is the largest of the published rules that may
apply to the model, so the bound covers its calls:

* OpenAI and OpenAI-compatible servers: the *tile* rule (the image fit in 2048 x 2048, its
  short side scaled down to 768, then 85 tokens plus 170 per 512 px tile; ``gpt-4o-mini``
  counts 2,833 plus 5,667 per tile), times 1.2 (the factor OpenAI applies to its newest
  models); for a ``mini`` or ``nano`` model, or one whose name is not OpenAI's, also the
  *patch* rule (32 px patches, at most 1,536, times 1.72 for ``mini``, else 2.46, the
  largest published multiplier);
* Anthropic: ``width x height / 750`` tokens, at most 4,784 per image (the newest models
  read up to 2,576 px on the long edge; older ones scale down to about 1,600 tokens);
* Gemini: 258 tokens per 768 x 768 tile (one tile when both sides are at most 384 px), and
  at least 1,120 (Gemini 3's default media resolution for images).

A server whose vision encoder counts otherwise (an open model behind an OpenAI-compatible
route) should set ``max_cost_per_query``: the ledger charges a call at most its bound and
pauses the campaign on a call that reported more (docs/reliability.md, *Ledger*).
"""

from __future__ import annotations

import math
from typing import Any

from .checks import MAX_IMAGE_PIXELS, MAX_IMAGE_SIDE

ImageSize = tuple[int, int]


def _openai_tiles(width: int, height: int) -> int:
    """512 px tiles after fitting in 2048 x 2048 and scaling the short side down to 768."""
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        s = 2048 / max(w, h)
        w, h = w * s, h * s
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = w * s, h * s
    return max(1, math.ceil(w / 512)) * max(1, math.ceil(h / 512))


def _openai_count(model: str, tiles: int, patches: int) -> int:
    """Tokens of an image of ``tiles`` 512 px tiles and ``patches`` 32 px patches (at most 1,536)."""
    name = model.lower().rsplit("/", 1)[-1]  # "openai/gpt-4o" behind a LiteLLM proxy
    if "gpt-4o-mini" in name:
        return 2833 + 5667 * tiles
    tile_rule = math.ceil(1.2 * (85 + 170 * tiles))
    if "nano" in name:
        factor = 2.46
    elif "mini" in name:
        factor = 1.72
    elif name.startswith(("gpt-", "o1", "o3", "chatgpt")):  # OpenAI's tile-rule models
        return tile_rule
    else:  # a model whose rule is not known: the largest published one
        factor = 2.46
    return max(tile_rule, math.ceil(factor * patches))


def openai_image_tokens(model: str, width: int, height: int) -> int:
    """Input tokens of one image for an OpenAI(-compatible) model (its published rule)."""
    patches = min(1536, math.ceil(width / 32) * math.ceil(height / 32))
    return _openai_count(model, _openai_tiles(width, height), patches)


def anthropic_image_tokens(width: int, height: int) -> int:
    """Input tokens of one image for a Claude model: width x height / 750, at most 4,784."""
    return min(4784, math.ceil(width * height / 750))


def gemini_image_tokens(width: int, height: int) -> int:
    """Input tokens of one image for a Gemini model: 258 per 768 px tile, at least 1,120."""
    tiles = 1 if max(width, height) <= 384 else math.ceil(width / 768) * math.ceil(height / 768)
    return max(1120, 258 * tiles)


def image_input_tokens(client: dict[str, Any], width: int, height: int) -> int:
    """Input tokens of one ``width`` x ``height`` image for a client config (stored JSON); 0 for a
    simulated client (charged its fixed cost)."""
    kind = client.get("kind")
    if kind == "anthropic":
        return anthropic_image_tokens(width, height)
    if kind == "gemini":
        return gemini_image_tokens(width, height)
    if kind == "simulated":
        return 0
    return openai_image_tokens(str(client.get("model") or ""), width, height)


def _gemini_most_tiles() -> int:
    """The most 768 px tiles of an accepted image (at most MAX_IMAGE_SIDE a side, MAX_IMAGE_PIXELS in all)."""
    most = 1
    for cols in range(1, math.ceil(MAX_IMAGE_SIDE / 768) + 1):
        w = 768 * (cols - 1) + 1  # the narrowest image with ``cols`` columns leaves the most rows
        h = min(MAX_IMAGE_SIDE, MAX_IMAGE_PIXELS // w)
        most = max(most, cols * math.ceil(h / 768))
    return most


def worst_image_tokens(client: dict[str, Any]) -> int:
    """The most input tokens one accepted image can cost a client (an image whose size is not
    known in advance: a model's image answer shown to a judge)."""
    kind = client.get("kind")
    if kind == "anthropic":
        return 4784
    if kind == "gemini":
        return max(1120, 258 * _gemini_most_tiles())
    if kind == "simulated":
        return 0
    # at most 4 x 2 tiles once fit in 2048 x 2048 with a short side of at most 768; at most 1,536 patches
    return _openai_count(str(client.get("model") or ""), 8, 1536)


def campaign_image_tokens(client: dict[str, Any], sizes: list[ImageSize]) -> int:
    """The most input tokens one of a campaign's images costs a client (0 without images)."""
    return max((image_input_tokens(client, w, h) for w, h in sizes), default=0)


def prompt_image_count(prompt: str) -> int:
    """How many images a stored prompt text names (``[image sha256:<hex>]``, service/prompts.py)."""
    return prompt.count("[image sha256:")
