"""Images in chat messages, for a model that sees (its projector loaded): each `image_url` (or a Responses
`input_image`) — a data URL, an https URL fetched through the one guard, or a `file_id` — is decoded by
Pillow here and re-encoded as a JPEG data URL (quality 95, no chroma subsampling), so llama.cpp never
fetches a URL nor parses a file a client made. JPEG because llama.cpp decodes base64 slowly: a 512×512 PNG
took ~60 ms to write and a BMP is 1 MB of base64, where this JPEG takes 1.4 ms and is ~150 KB.
Pixels are counted from the header before anything is decoded (a decompression bomb is a 400), the
orientation from EXIF is applied, the first frame of an animation is taken, and the image is scaled so its
longest side is at most `LONGEST_SIDE` (`LOW_DETAIL_SIDE` for `detail: "low"`; padded to `SHORTEST_SIDE`
where thinner), which bounds what the projector makes of it. Pillow is imported by the first image read."""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
from collections import OrderedDict
from typing import Any

import anyio

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest, ChatMessage
from modelport.service.fetching import Fetcher
from modelport.service.state.files import Files
from modelport.settings import Limits

FORMATS = ("PNG", "JPEG", "WEBP", "GIF", "BMP")
MAX_PIXELS = 50_000_000  # a header claiming more is refused before decoding
LONGEST_SIDE = 2048
LOW_DETAIL_SIDE = 512  # `detail: "low"`: fewer pixels, so fewer tokens where the projector's count varies
SHORTEST_SIDE = 16
_MADE = 32  # images kept re-encoded


class Images:
    """Resolves the image parts of chat messages into checked JPEG data URLs."""

    def __init__(self, files: Files, fetcher: Fetcher, limits: Limits) -> None:
        self.files = files
        self.fetcher = fetcher
        self.limits = limits
        # A conversation sends its images again every turn: each is checked and re-encoded once.
        self._made: OrderedDict[tuple[bytes, int], str] = OrderedDict()

    async def chat(self, request: ChatCompletionRequest) -> ChatCompletionRequest:
        """The request with every image part an `image_url` part holding a JPEG data URL."""
        found = request.parts("image_url", "input_image")
        if not found:
            return request
        if len(found) > self.limits.fetch_items:
            raise InvalidRequestError(
                f"A request may carry {self.limits.fetch_items} images at most; this one has {len(found)}.",
                param="messages",
                code="too_many_images",
            )
        messages = [m.model_dump(exclude_none=True) for m in request.messages]
        budget = self.limits.fetch_request_bytes
        for i, j in found:
            param = f"messages[{i}].content[{j}]"
            part = messages[i]["content"][j]
            data = await self._bytes(part, param, min(budget, self.limits.fetch_bytes))
            budget -= len(data)
            given = part.get("image_url")
            detail = (given.get("detail") if isinstance(given, dict) else None) or part.get("detail")
            side = LOW_DETAIL_SIDE if detail == "low" else LONGEST_SIDE
            messages[i]["content"][j] = {
                "type": "image_url",
                "image_url": {"url": await self._made_url(data, param, side)},
            }
        return request.model_copy(update={"messages": [ChatMessage.model_validate(m) for m in messages]})

    async def _made_url(self, data: bytes, param: str, side: int) -> str:
        key = (hashlib.blake2b(data, digest_size=16).digest(), side)
        url = self._made.get(key)
        if url is None:
            encoded = await anyio.to_thread.run_sync(normalised, data, param, side)
            url = self._made[key] = "data:image/jpeg;base64," + base64.b64encode(encoded).decode()
            while len(self._made) > _MADE:
                self._made.popitem(last=False)
        self._made.move_to_end(key)
        return url

    async def _bytes(self, part: dict[str, Any], param: str, cap: int) -> bytes:
        given = part.get("image_url")
        url = given.get("url") if isinstance(given, dict) else given
        if part.get("file_id") and not url:
            return (await self.files.read(str(part["file_id"]), cap))[1]
        if not isinstance(url, str) or not url:
            raise InvalidRequestError(f"{param}.image_url.url is required.", param=f"{param}.image_url.url")
        if url.startswith("data:"):
            return _inline(url, f"{param}.image_url.url", cap)
        if url.startswith("file-"):
            return (await self.files.read(url, cap))[1]
        return (await self.fetcher.get(url, f"{param}.image_url.url", cap)).content


def normalised(data: bytes, param: str, longest: int = LONGEST_SIDE) -> bytes:
    """The image as a JPEG within the bounds above, or a 400 naming `param` that says what is wrong."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            if image.format not in FORMATS:
                raise _bad(
                    param, f"is {image.format or 'an unknown format'}; images are {', '.join(FORMATS)}"
                )
            width, height = image.size
            if width * height > MAX_PIXELS:
                raise _bad(param, f"is {width}x{height} pixels, more than the {MAX_PIXELS} an image may have")
            image.seek(0)  # an animation's first frame
            upright = ImageOps.exif_transpose(image).convert("RGB")
    except Image.DecompressionBombError:
        raise _bad(param, f"has more than the {MAX_PIXELS} pixels an image may have") from None
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError):
        raise _bad(param, "is not an image that can be read (PNG, JPEG, WebP, GIF or BMP)") from None
    upright.thumbnail((longest, longest))
    if min(upright.size) < SHORTEST_SIDE:
        canvas = Image.new("RGB", (max(upright.width, SHORTEST_SIDE), max(upright.height, SHORTEST_SIDE)))
        canvas.paste(upright)
        upright = canvas
    out = io.BytesIO()
    upright.save(out, format="JPEG", quality=95, subsampling=0)
    return out.getvalue()


def _inline(url: str, param: str, cap: int) -> bytes:
    header, _, encoded = url.partition(",")
    if ";base64" not in header:
        raise _bad(param, "is a data URL that is not base64")
    if len(encoded) * 3 // 4 > cap:
        raise InvalidRequestError(f"{param} is over the limit of {cap} bytes.", param=param)
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise _bad(param, "is a data URL whose base64 is broken") from None


def _bad(param: str, what: str) -> InvalidRequestError:
    return InvalidRequestError(f"{param} {what}.", param=param, code="invalid_image")
