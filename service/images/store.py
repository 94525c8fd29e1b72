"""The image store: every image stored once, keyed by the sha256 of its bytes.

One table, ``images``, in the campaign database (SQLite embedded, or one PostgreSQL
shared by several hosts): the bytes as received and their blind copy
(:func:`service.images.checks.blind_copy`), written once. Two processes storing the same
image at the same time both succeed (``INSERT ... ON CONFLICT DO NOTHING``), and the row
never changes afterwards, so a reader needs no lock.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from service.clients.content import ImagePart, UserTurn
from service.images.checks import CheckedImage, blind_copy, check_data_url
from service.models import StoredImage, utcnow
from service.prompts import turn_image_urls


def put_image(session: Session, image: CheckedImage) -> str:
    """Store ``image`` (and its blind copy) unless its sha256 is already there; returns the sha256."""
    if session.get(StoredImage, image.sha256) is not None:
        return image.sha256
    blind, blind_type = blind_copy(image)
    values = dict(
        sha256=image.sha256,
        media_type=image.media_type,
        width=image.width,
        height=image.height,
        size_bytes=len(image.data),
        data=image.data,
        blind=blind,
        blind_media_type=blind_type,
        created_at=utcnow(),
    )
    insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
    session.execute(insert(StoredImage).values(**values).on_conflict_do_nothing(index_elements=["sha256"]))
    return image.sha256


def get_image(session: Session, sha256: str) -> StoredImage | None:
    """The stored row of one image, or None."""
    return session.execute(select(StoredImage).where(StoredImage.sha256 == sha256)).scalar_one_or_none()


def store_prompt_images(session: Session, items: list[Any]) -> int:
    """Store the images of a campaign's validated prompt items; returns how many distinct images."""
    stored: set[str] = set()
    for item in items:
        if isinstance(item, str):
            continue
        data = item if isinstance(item, dict) else item.model_dump()
        for urls in turn_image_urls(data):
            for url in urls:
                image = check_data_url(url)
                if image.sha256 not in stored:
                    stored.add(put_image(session, image))
    return len(stored)


def load_images(session: Session, hashes: list[str], blind: bool = False) -> list[tuple[str, bytes]]:
    """(media type, bytes) of ``hashes`` in order: the bytes as stored, or their blind copies."""
    rows = {
        r.sha256: r for r in session.execute(select(StoredImage).where(StoredImage.sha256.in_(set(hashes)))).scalars()
    }
    missing = [h for h in hashes if h not in rows]
    if missing:
        raise LookupError(f"image sha256:{missing[0]} is not in the image store")
    if blind:
        return [(rows[h].blind_media_type, bytes(rows[h].blind)) for h in hashes]
    return [(rows[h].media_type, bytes(rows[h].data)) for h in hashes]


def blind_copies(session: Session, hashes: list[str]) -> dict[str, tuple[str, bytes]]:
    """{sha256: (media type, blind copy)} of the ``hashes`` the store holds (the others are absent)."""
    rows = session.execute(select(StoredImage).where(StoredImage.sha256.in_(set(hashes)))).scalars()
    return {r.sha256: (r.blind_media_type, bytes(r.blind)) for r in rows}


def with_images(session: Session, turns: list[str], hashes: list[list[str]]) -> list[UserTurn]:
    """A prompt's user turns with their images, as the model clients send them (service/clients/content.py)."""
    out = []
    for text, turn_hashes in zip(turns, hashes):
        images = load_images(session, turn_hashes) if turn_hashes else []
        out.append(UserTurn(text, tuple(ImagePart(t, b) for t, b in images)))
    return out
