"""Image checks and blind copies (Pillow does every decode and encode; nothing here parses a format).

An image enters llmduel as a ``data:`` URL (a REST body, a campaign file) or as bytes (a
file next to a campaign file, a model's image answer). :func:`check_image` accepts it or
raises :class:`ImageError` whose message is the reason (the API answers 422 with it):

* formats: PNG, JPEG, WebP and GIF, recognised from the bytes by Pillow (a ``data:`` URL's
  declared type must agree); SVG and everything else are refused;
* at most :data:`MAX_IMAGE_BYTES` bytes, :data:`MAX_IMAGE_SIDE` pixels a side and
  :data:`MAX_IMAGE_PIXELS` pixels (width x height, read from the header before any pixel
  is decoded, so a decompression bomb such as a 50,000 x 50,000 PNG of a few kilobytes is
  refused without allocating it), at most :data:`MAX_GIF_FRAMES` frames;
* the whole image must decode: a truncated file is refused.

:func:`blind_copy` is what annotators and judges receive: the pixels re-encoded into a new
file with no metadata at all (no EXIF, PNG text chunks, XMP, ICC profile or C2PA manifest;
real providers write their name into generated images). JPEG stays JPEG (quality 90);
PNG, WebP and GIF (its first frame) become PNG.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import re
import warnings
from dataclasses import dataclass

from PIL import Image, UnidentifiedImageError

MAX_IMAGE_BYTES = 8 * 1024 * 1024
MAX_IMAGE_PIXELS = 16_777_216  # 4096 x 4096
MAX_IMAGE_SIDE = 8192  # pixels a side (Anthropic refuses larger; it also bounds an image's token count)
MAX_IMAGES_PER_PROMPT = 8
MAX_GIF_FRAMES = 100

# Pillow's format name -> the media type llmduel accepts and serves.
MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)((?:;[\w.+-]+=[\w.+-]+)*);base64,(.*)", re.DOTALL)


class ImageError(ValueError):
    """An image llmduel refuses; the message is the reason, fit for a 422."""


@dataclass(frozen=True)
class CheckedImage:
    """An accepted image: its bytes as received, their sha256, its media type and size in pixels."""

    data: bytes
    sha256: str
    media_type: str
    width: int
    height: int


def decode_data_url(url: str) -> tuple[str, bytes]:
    """``data:image/png;base64,...`` -> (declared media type, bytes). Only base64 data URLs."""
    if not isinstance(url, str) or not url.startswith("data:"):
        if isinstance(url, str) and url.lower().startswith(("http://", "https://")):
            raise ImageError("remote image URLs are not fetched; send the image as a data: URL or a file")
        raise ImageError("an image must be a data: URL (data:image/png;base64,...)")
    m = _DATA_URL.fullmatch(url.strip())
    if m is None:
        raise ImageError("malformed data: URL (expected data:<type>;base64,<data>)")
    media_type = m.group(1).lower()
    if media_type not in MEDIA_TYPES.values():
        raise ImageError(f"unsupported data: URL type {media_type!r} (accepted: PNG, JPEG, WebP, GIF)")
    payload = m.group(3)
    if len(payload) > (MAX_IMAGE_BYTES * 4) // 3 + 8:
        raise ImageError(f"image larger than {MAX_IMAGE_BYTES} bytes")
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ImageError("the data: URL's base64 is invalid") from None
    return media_type, data


def check_image(data: bytes, declared: str | None = None) -> CheckedImage:
    """Accept ``data`` or raise :class:`ImageError` (formats, bytes, pixels, frames, truncation)."""
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageError(f"image larger than {MAX_IMAGE_BYTES} bytes ({len(data)} bytes)")
    if not data:
        raise ImageError("empty image")
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=list(MEDIA_TYPES)) as im:
                fmt, (width, height) = im.format, im.size
                media_type = MEDIA_TYPES.get(fmt or "")
                if media_type is None:
                    raise ImageError(f"unsupported image format {fmt}")
                if declared is not None and declared != media_type:
                    raise ImageError(f"the data: URL says {declared} but the bytes are {media_type}")
                if max(width, height) > MAX_IMAGE_SIDE:
                    raise ImageError(
                        f"image of {width} x {height} pixels exceeds the limit of {MAX_IMAGE_SIDE} pixels a side"
                    )
                if width * height > MAX_IMAGE_PIXELS:
                    raise ImageError(
                        f"image of {width} x {height} pixels exceeds the limit of {MAX_IMAGE_PIXELS} pixels"
                    )
                frames = getattr(im, "n_frames", 1)
                if frames > MAX_GIF_FRAMES:
                    raise ImageError(f"image with {frames} frames (at most {MAX_GIF_FRAMES})")
                for n in range(frames):
                    im.seek(n)
                    im.load()
        except ImageError:
            raise
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageError(f"image exceeds the limit of {MAX_IMAGE_PIXELS} pixels (decompression bomb)") from None
        except UnidentifiedImageError:
            raise ImageError("not an image in an accepted format (PNG, JPEG, WebP, GIF; SVG is refused)") from None
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            raise ImageError(f"the image does not decode (truncated or corrupt): {exc}") from None
    return CheckedImage(
        data=data, sha256=hashlib.sha256(data).hexdigest(), media_type=media_type, width=width, height=height
    )


def check_data_url(url: str) -> CheckedImage:
    """A ``data:`` URL checked as :func:`check_image` checks bytes, its declared type included."""
    declared, data = decode_data_url(url)
    return check_image(data, declared)


def data_url_size(url: str) -> tuple[int, int]:
    """(width, height) of an accepted ``data:`` URL's image, read from its header."""
    return image_size(decode_data_url(url)[1])


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) of an accepted image's bytes, read from its header."""
    with Image.open(io.BytesIO(data), formats=list(MEDIA_TYPES)) as im:
        return im.size


def blind_copy(image: CheckedImage) -> tuple[bytes, str]:
    """(bytes, media type) of a metadata-free re-encoding of an accepted image's (first frame's) pixels."""
    with Image.open(io.BytesIO(image.data)) as im:
        im.seek(0)
        has_alpha = im.mode in ("RGBA", "LA", "PA") or (im.mode == "P" and "transparency" in im.info)
        mode = "RGBA" if has_alpha else "RGB"
        pixels = im.convert(mode)
        # A new image from the raw pixels only: no ``info`` (text chunks, EXIF, XMP, ICC) to carry over.
        clean = Image.frombytes(mode, pixels.size, pixels.tobytes())
    out = io.BytesIO()
    if image.media_type == "image/jpeg" and mode == "RGB":
        clean.save(out, format="JPEG", quality=90)
        return out.getvalue(), "image/jpeg"
    clean.save(out, format="PNG", optimize=False)
    return out.getvalue(), "image/png"


def to_data_url(data: bytes, media_type: str) -> str:
    """``data:<type>;base64,<data>``."""
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"
