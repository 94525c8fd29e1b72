"""Blinding: the secret draws of a campaign (prompt, side, tie coin), keyed by its draw key.

HMAC-SHA256 under the campaign's draw key, which no route shows; campaigns made before draw
keys keep their seeded draws.
"""

from __future__ import annotations

import hashlib
import hmac
import random
import secrets

DRAW_KEY_BYTES = 32


def new_draw_key() -> str:
    """A campaign's draw key: 256 random bits (hex) from :mod:`secrets`, never shown by any route."""
    return secrets.token_hex(DRAW_KEY_BYTES)


def keyed_uniform(draw_key: str, label: str) -> int:
    """A 256-bit integer, HMAC-SHA256 of ``label`` under the campaign's draw key."""
    return int.from_bytes(hmac.new(bytes.fromhex(draw_key), label.encode("ascii"), hashlib.sha256).digest(), "big")


def answer_secret(draw_key: str | None) -> bytes | None:
    """The key of a campaign's simulated answers, derived from its secret draw key (None: a
    campaign made before draw keys, whose simulated texts stay as they were)."""
    if draw_key is None:
        return None
    return hmac.new(bytes.fromhex(draw_key), b"simulated-answers", hashlib.sha256).digest()


def draw_prompt_and_side(seed: int, number: int, n_prompts: int, draw_key: str | None = None) -> tuple[int, bool]:
    """Duel ``number``'s prompt index and whether answer "a" is model_i's.

    With a draw key (every campaign created since the blinding): HMAC-SHA256 of
    ``"{number}:prompt"`` and ``"{number}:side"`` under the key; the prompt index is
    the first value modulo ``n_prompts`` (bias below ``n_prompts / 2**256``), the side
    the second value's lowest bit. Without one (older campaigns, ``draw_key`` NULL):
    the former draw from the campaign seed, so their duels keep their old draws.
    """
    if draw_key is None:
        rng = random.Random(f"{seed}:{number}:draw")
        prompt_index = rng.randrange(n_prompts)
        return prompt_index, rng.random() < 0.5
    prompt_index = keyed_uniform(draw_key, f"{number}:prompt") % n_prompts
    return prompt_index, bool(keyed_uniform(draw_key, f"{number}:side") & 1)


def tie_coin(seed: int, number: int, draw_key: str | None = None) -> bool:
    """The fair coin of a tie under ``tie_policy=random``: True credits model_i (keyed like the draw)."""
    if draw_key is None:
        return random.Random(f"{seed}:{number}:tie").random() < 0.5
    return bool(keyed_uniform(draw_key, f"{number}:tie") & 1)
