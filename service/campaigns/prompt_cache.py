"""The prompts of this process's campaigns, cached: they never change once a campaign exists (:class:`PromptCache`)."""

from __future__ import annotations

from sqlalchemy import select

from ..db import Database
from ..images.store import with_images
from ..models import Prompt

#: Entries kept per cache before it is emptied (the rows are read again on a miss).
MAX_ENTRIES = 50_000


class PromptCache:
    """Prompt texts and their extras (user turns, reference answer) by (campaign id, prompt index).

    Owns both caches; the cycle's transactions, the hot path and :class:`.calls.Calls` read
    through it. Reads on a miss use the caller's session or a short read of ``db``."""

    def __init__(self, db: Database):
        self.db = db
        self._texts: dict[tuple[int, int], str] = {}
        self._extras: dict[tuple[int, int], tuple[list[str] | None, str | None]] = {}
        self._images: dict[tuple[int, int], list[list[str]]] = {}

    def cached_prompt(self, campaign_id: int, idx: int) -> str | None:
        return self._texts.get((campaign_id, idx))

    def remember_prompt(self, campaign_id: int, idx: int, text: str) -> str:
        """Prompts never change once a campaign exists: they are cached per process."""
        if len(self._texts) >= MAX_ENTRIES:
            self._texts.clear()
        self._texts[(campaign_id, idx)] = text
        return text

    def prompt_text(self, s, campaign_id: int, idx: int) -> str:
        """A prompt's text: from the cache, else read in the caller's session ``s``."""
        text = self.cached_prompt(campaign_id, idx)
        if text is None:
            text = self.remember_prompt(
                campaign_id,
                idx,
                s.execute(select(Prompt.text).where(Prompt.campaign_id == campaign_id, Prompt.idx == idx)).scalar_one(),
            )
        return text

    def cached_prompt_extras(self, campaign_id: int, idx: int) -> tuple[list[str] | None, str | None] | None:
        """:meth:`prompt_extras` from this process's cache only (None: not cached yet)."""
        return self._extras.get((campaign_id, idx))

    def prompt_extras(self, campaign_id: int, idx: int) -> tuple[list[str] | None, str | None]:
        """A prompt's user turns (None: a single turn) and reference answer; cached, they never change."""
        extras = self.cached_prompt_extras(campaign_id, idx)
        if extras is None:
            with self.db.read() as s:
                extras = self.prompt_extras_in(s, campaign_id, idx)
        return extras

    def prompt_extras_in(self, s, campaign_id: int, idx: int) -> tuple[list[str] | None, str | None]:
        """:meth:`prompt_extras` read in the caller's session ``s`` on a cache miss."""
        key = (campaign_id, idx)
        extras = self._extras.get(key)
        if extras is None:
            row = s.execute(
                select(Prompt.turns, Prompt.reference, Prompt.images).where(
                    Prompt.campaign_id == campaign_id, Prompt.idx == idx
                )
            ).first()
            extras = (row.turns, row.reference) if row is not None else (None, None)
            if row is not None and row.images:  # vision: the sha256 of each turn's images (service/images/)
                self._images[key] = row.images
            if len(self._extras) >= MAX_ENTRIES:
                self._extras.clear()
                self._images.clear()
            self._extras[key] = extras
        return extras

    def image_hashes(self, campaign_id: int, idx: int) -> list[list[str]] | None:
        """The sha256 of each turn's images of a prompt whose extras are cached (None: no images)."""
        return self._images.get((campaign_id, idx))

    def turns_with_images(self, turns: list[str], hashes: list[list[str]]) -> list:
        """A prompt's turns with their image bytes (read from the image store each time, never cached)."""
        with self.db.read() as s:
            return with_images(s, turns, hashes)
