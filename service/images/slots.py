"""What an annotator reads in place of an image's name.

Stored texts name an image by its content hash (``[image sha256:<hex>]``, service/prompts.py,
service/clients/images.py). A hash would let an annotator tell that two duels show the same
answer (answers are reused), so what annotators read names each image by its *slot* in the duel
instead: ``[image a]`` and ``[image b]`` for image answers, ``[image p1]`` ... for the prompt's
images, the same slots as the voting page's image URLs (service/web/image_routes.py).
"""

from __future__ import annotations

import itertools
import re
from typing import Any

#: A stored image name, its hash in group 1 (the judge's, the pages' and this module's one pattern).
NAME = re.compile(r"\[image sha256:([0-9a-f]{64})\]")


def _prompt_slots(text: str) -> str:
    count = itertools.count(1)
    return NAME.sub(lambda _m: f"[image p{next(count)}]", text)


def slot_names(view: dict[str, Any]) -> dict[str, Any]:
    """``view``'s ``prompt``, ``answer_a`` and ``answer_b`` with every image hash replaced by its slot."""
    out = dict(view)
    if isinstance(out.get("prompt"), str):
        out["prompt"] = _prompt_slots(out["prompt"])
    for side in ("a", "b"):
        key = f"answer_{side}"
        if isinstance(out.get(key), str):
            out[key] = NAME.sub(f"[image {side}]", out[key])
    return out
