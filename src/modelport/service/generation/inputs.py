"""Content parts beyond text in chat messages. A file — by `file_id` (the caller's project's), inline as
`file_data`, or by `file_url` (fetched through the one guard) — becomes its text: a PDF's pages read with
pypdf, a text file decoded. Images and audio reach no model here (none has a projector): a 400 naming the
model and the part, never a 500 from the engine. Runs before the chat path plans, so every face and the
Responses API (whose `input_file` parts become these) share it."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest
from modelport.service.documents import DocumentReader, UnreadableError
from modelport.service.fetching import Fetcher
from modelport.service.state.files import Files
from modelport.settings import Limits

_MEDIA_PARTS = {"image_url": "an image", "input_audio": "audio", "input_image": "an image"}
_MEDIA_KINDS = {"image_url": "image", "input_audio": "audio", "input_image": "image"}


class Inputs:
    """Resolves the file parts of chat requests into text."""

    def __init__(self, files: Files, fetcher: Fetcher, limits: Limits, documents: DocumentReader) -> None:
        self.files = files
        self.fetcher = fetcher
        self.limits = limits
        self.documents = documents

    async def chat(self, request: ChatCompletionRequest) -> ChatCompletionRequest:
        """The request with each `file` part replaced by a text part holding the file's text."""
        found = request.parts("file")
        if not found:
            return request
        if len(found) > self.limits.fetch_items:
            raise InvalidRequestError(
                f"A request may bring in {self.limits.fetch_items} files at most; this one has {len(found)}.",
                param="messages",
            )
        budget = self.limits.fetch_request_bytes
        messages = [m.model_copy(deep=True) for m in request.messages]
        for i, j in found:
            content = messages[i].content
            assert isinstance(content, list)
            param = f"messages[{i}].content[{j}]"
            name, data = await self._file(content[j].get("file") or {}, param, budget)
            budget -= len(data)
            text = await self._text_of(name, data, param)
            content[j] = {"type": "text", "text": f"<file name={name!r}>\n{text}\n</file>"}
        return request.model_copy(update={"messages": messages})

    async def _text_of(self, name: str, data: bytes, param: str) -> str:
        try:
            return await self.documents.text(name, data)
        except UnreadableError as error:
            why = "; the models here read PDFs and UTF-8 text." if error.unsupported else "."
            raise InvalidRequestError(f"{param} ({name}) is {error}{why}", param=param) from None

    async def _file(self, given: dict[str, Any], param: str, budget: int) -> tuple[str, bytes]:
        if not isinstance(given, dict):
            raise InvalidRequestError(f"{param}.file must be an object.", param=f"{param}.file")
        cap = min(budget, self.limits.fetch_bytes)
        name = str(given.get("filename") or "")
        if given.get("file_id"):
            stored_name, data = await self.files.read(str(given["file_id"]), cap)
            return name or stored_name, data
        if given.get("file_data"):
            return name or "file", _inline(str(given["file_data"]), f"{param}.file.file_data", cap)
        if given.get("file_url"):
            fetched = await self.fetcher.get(str(given["file_url"]), f"{param}.file.file_url", cap)
            return name or fetched.name or "file", fetched.content
        raise InvalidRequestError(
            f"{param}.file needs file_id, file_data or file_url.", param=f"{param}.file"
        )


def refuse_media(request: ChatCompletionRequest, model: str, media: tuple[str, ...] = ()) -> None:
    """A 400 for an image or audio part that the model cannot read (`media`: what its projector lets it
    read beside text)."""
    for i, message in enumerate(request.messages):
        if not isinstance(message.content, list):
            continue
        for j, part in enumerate(message.content):
            kind = part.get("type") if isinstance(part, dict) else None
            if kind in _MEDIA_PARTS and _MEDIA_KINDS[kind] not in media:
                what = _MEDIA_PARTS[kind]
                raise InvalidRequestError(
                    f"The model `{model}` reads text only: messages[{i}].content[{j}] is {what} "
                    f"(`{kind}`), and this model has no projector for it.",
                    param=f"messages[{i}].content[{j}].type",
                    code="model_not_multimodal",
                )


def _inline(data: str, param: str, cap: int) -> bytes:
    """`file_data`: a data URL or bare base64."""
    encoded = data.split(",", 1)[1] if data.startswith("data:") and "," in data else data
    if len(encoded) * 3 // 4 > cap:
        raise InvalidRequestError(f"{param} is over the limit of {cap} bytes.", param=param)
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequestError(f"{param} is not base64 (or a base64 data URL).", param=param) from None
