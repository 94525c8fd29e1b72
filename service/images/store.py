"""The image store: every image stored once, keyed by the sha256 of its bytes.

One table, ``images``, in the campaign database (SQLite embedded, or one PostgreSQL
shared by several hosts): the bytes as received and their blind copy
(:func:`service.images.checks.blind_copy`), written once. Two processes storing the same
image at the same time both succeed (``INSERT ... ON CONFLICT DO NOTHING``), and the row
never changes afterwards, so a reader needs no lock.
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from service.images.checks import CheckedImage, blind_copy
from service.models import StoredImage, utcnow


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
