"""Pictures for models: scaled to fit a size limit, and described for models that see none.

Vendors cap what one image may be (Anthropic: 5 MB and about 1,568 pixels on the long side before
it is scaled down on their side; OpenAI: 20 MB, scaled to fit 2,048 by 768) and a large picture
costs many input tokens, so every picture a model is shown is first fitted here: shrunk to a
longest side, then, while still over the byte limit, re-encoded as JPEG and shrunk further.
A picture within both limits goes out as it is.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from PIL import Image as Pillow
from PIL import UnidentifiedImageError

from .base import Image

DEFAULT_MAX_SIDE = 1568
"""Longest side, in pixels, of a picture shown to a model."""
DEFAULT_MAX_BYTES = 1_000_000
"""Largest encoded picture shown to a model."""
VENDOR_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
"""The formats the vendors take as image input."""

_FORMATS = {"PNG": "image/png", "JPEG": "image/jpeg", "GIF": "image/gif", "WEBP": "image/webp"}
_SHRINK = 0.75
_JPEG_QUALITY = 85


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """How large a picture shown to a model may be."""

    max_side: int = DEFAULT_MAX_SIDE
    max_bytes: int = DEFAULT_MAX_BYTES


@dataclass(frozen=True, slots=True)
class Fitted:
    """A picture ready for a model, and what it was before fitting."""

    image: Image | None
    """None when the data is no picture a model can take."""
    original: tuple[int, int] | None
    """Width and height of the picture as it was made."""


def pixel_size(data: bytes) -> tuple[int, int] | None:
    """Width and height of an encoded picture; None when it is none Pillow reads."""
    try:
        with Pillow.open(io.BytesIO(data)) as picture:
            width, height = picture.size
            return width, height
    except (UnidentifiedImageError, OSError, ValueError):
        return None


def describe(data: bytes, media_type: str) -> str:
    """``640x480 PNG`` (the format alone when the size cannot be read)."""
    kind = media_type.removeprefix("image/").upper()
    size = pixel_size(data)
    return f"{size[0]}x{size[1]} {kind}" if size else kind


def input_tokens(image: Image) -> int:
    """About what a picture costs a model in input tokens.

    A token per 750 pixels (Anthropic's rule; OpenAI's tiles come out close), at least 85;
    1,600 when its size cannot be read.
    """
    size = pixel_size(image.data)
    return max(85, size[0] * size[1] // 750) if size else 1600


def labelled(name: str, original: Image, fitted: Image) -> Image:
    """``fitted`` named ``name (2400x1600 PNG, shown scaled to 1568x1045 PNG)``."""
    label = f"{name} ({describe(original.data, original.media_type)}"
    if fitted.data is not original.data:
        label += f", shown scaled to {describe(fitted.data, fitted.media_type)}"
    return Image(fitted.media_type, fitted.data, f"{label})")


def fit(image: Image, limits: ImageLimits) -> Fitted:
    """``image`` within ``limits``: as it is when it fits, else scaled and re-encoded."""
    try:
        with Pillow.open(io.BytesIO(image.data)) as picture:
            original = picture.size
            mime = _FORMATS.get(picture.format or "")
            if mime is None:
                return Fitted(None, original)
            if max(original) <= limits.max_side and len(image.data) <= limits.max_bytes:
                return Fitted(Image(mime, image.data, image.label), original)
            picture.seek(0)  # the first frame of an animation
            return Fitted(_shrunk(picture.copy(), mime, image.label, limits), original)
    except (UnidentifiedImageError, OSError, ValueError):
        return Fitted(None, None)


def _shrunk(picture: Pillow.Image, mime: str, label: str, limits: ImageLimits) -> Image:
    """Scaled to the longest side, then smaller (as JPEG) until it is under the byte limit."""
    picture.thumbnail((limits.max_side, limits.max_side))
    keep_png = mime == "image/png" or picture.mode in ("RGBA", "LA", "P")
    data, mime = _encode(picture, "PNG" if keep_png else "JPEG")
    while len(data) > limits.max_bytes and max(picture.size) > 16:
        picture = _flat(picture)
        data, mime = _encode(picture, "JPEG")
        if len(data) <= limits.max_bytes:
            break
        width, height = picture.size
        picture = picture.resize((max(1, int(width * _SHRINK)), max(1, int(height * _SHRINK))))
    return Image(mime, data, label)


def _flat(picture: Pillow.Image) -> Pillow.Image:
    """RGB on white: JPEG has no transparency."""
    if picture.mode == "RGB":
        return picture
    rgba = picture.convert("RGBA")
    background = Pillow.new("RGB", rgba.size, (255, 255, 255))
    background.paste(rgba, mask=rgba.getchannel("A"))
    return background


def _encode(picture: Pillow.Image, kind: str) -> tuple[bytes, str]:
    buffer = io.BytesIO()
    if kind == "JPEG":
        _flat(picture).save(buffer, format="JPEG", quality=_JPEG_QUALITY)
    else:
        picture.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue(), _FORMATS[kind]
