"""Image checks, blind copies and the content-addressed store (service/images/)."""

from __future__ import annotations

import base64
import io
import struct
import zlib

import pytest
from PIL import Image, PngImagePlugin

from service.images.checks import (
    MAX_IMAGE_BYTES,
    ImageError,
    blind_copy,
    check_data_url,
    check_image,
    to_data_url,
)


def png(size=(8, 6), color=(200, 30, 40), text: dict | None = None, mode="RGB") -> bytes:
    im = Image.new(mode, size, color)
    info = PngImagePlugin.PngInfo()
    for k, v in (text or {}).items():
        info.add_text(k, v)
    out = io.BytesIO()
    im.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def encoded(fmt: str, **kw) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (10, 7), (1, 2, 3)).save(out, format=fmt, **kw)
    return out.getvalue()


def huge_png(width: int, height: int) -> bytes:
    """A tiny PNG whose header claims width x height (IHDR rewritten, its CRC recomputed)."""
    data = bytearray(png((1, 1), mode="L", color=0))
    ihdr = struct.pack(">II", width, height) + bytes(data[24:29])
    data[16:29] = ihdr
    data[29:33] = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return bytes(data)


@pytest.mark.parametrize(
    "fmt,media", [("PNG", "image/png"), ("JPEG", "image/jpeg"), ("WEBP", "image/webp"), ("GIF", "image/gif")]
)
def test_accepted_formats(fmt, media):
    img = check_data_url(to_data_url(encoded(fmt), media))
    assert (img.media_type, img.width, img.height) == (media, 10, 7)
    assert len(img.sha256) == 64


@pytest.mark.parametrize(
    "url,reason",
    [
        (to_data_url(png()[:-30], "image/png"), "truncated"),
        (to_data_url(huge_png(50_000, 50_000), "image/png"), "pixels"),
        (to_data_url(huge_png(5000, 5000), "image/png"), "exceeds the limit"),
        (to_data_url(b'<svg xmlns="http://www.w3.org/2000/svg"/>', "image/png"), "SVG is refused"),
        ("data:image/svg+xml;base64," + base64.b64encode(b"<svg/>").decode(), "unsupported data: URL type"),
        ("data:text/plain;base64,aGVsbG8=", "unsupported data: URL type"),
        (to_data_url(encoded("JPEG"), "image/png"), "says image/png but the bytes are image/jpeg"),
        ("https://example.com/cat.png", "remote image URLs are not fetched"),
        ("data:image/png;base64,@@@", "base64 is invalid"),
        ("data:image/png,rawbytes", "malformed data: URL"),
        ("data:image/png;base64,", "empty image"),
    ],
)
def test_refused_with_reason(url, reason):
    with pytest.raises(ImageError, match=reason):
        check_data_url(url)


def test_too_many_bytes():
    with pytest.raises(ImageError, match=f"larger than {MAX_IMAGE_BYTES} bytes"):
        check_image(b"\x89PNG" + b"\0" * MAX_IMAGE_BYTES)


def test_blind_copy_drops_every_metadata_chunk():
    secret = "made-by-secret-model-x9"
    raw = png(text={"Software": secret, "parameters": secret})
    assert secret.encode() in raw
    blind, media = blind_copy(check_image(raw))
    assert media == "image/png" and secret.encode() not in blind
    with Image.open(io.BytesIO(blind)) as im:
        assert not getattr(im, "text", {}) and "exif" not in im.info and "icc_profile" not in im.info
        assert im.getpixel((3, 3)) == (200, 30, 40)

    exif = Image.Exif()
    exif[0x0131] = secret  # Software
    exif[0x010F] = secret  # Make
    jpeg = encoded("JPEG", exif=exif.tobytes(), comment=secret.encode())
    assert secret.encode() in jpeg
    blind, media = blind_copy(check_image(jpeg))
    assert media == "image/jpeg" and secret.encode() not in blind
    with Image.open(io.BytesIO(blind)) as im:
        assert not im.getexif() and "comment" not in im.info

    webp = encoded("WEBP", exif=exif.tobytes(), xmp=f"<x>{secret}</x>".encode())
    assert secret.encode() in webp
    blind, media = blind_copy(check_image(webp))
    assert media == "image/png" and secret.encode() not in blind


def test_store_once_per_hash(db_url):
    from service.db import Database
    from service.images.store import get_image, put_image

    db = Database(db_url)
    try:
        img = check_image(png(color=(9, 8, 7), text={"Software": "model-y"}))
        with db.write() as s:
            assert put_image(s, img) == img.sha256
        with db.write() as s:  # a second store of the same bytes is a no-op
            assert put_image(s, img) == img.sha256
        with db.read() as s:
            row = get_image(s, img.sha256)
            assert row is not None and bytes(row.data) == img.data
            assert b"model-y" not in bytes(row.blind) and row.blind_media_type == "image/png"
            assert (row.width, row.height, row.size_bytes) == (8, 6, len(img.data))
            assert get_image(s, "0" * 64) is None
    finally:
        db.dispose()
