"""Audio in chat messages (`input_audio` parts, `wav` or `mp3`) for a model without an audio projector —
every model here: the audio is transcribed by the server's transcription model and the model reads the
transcript, in an `<audio transcript>` block, instead. Runs before the chat path plans."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable

from modelport.errors import InvalidRequestError
from modelport.protocol.requests import ChatCompletionRequest, ChatMessage

FORMATS = ("wav", "mp3")
Transcribe = Callable[[bytes, str, str], Awaitable[str]]  # audio, its format, the part's param -> text


async def heard(request: ChatCompletionRequest, transcribe: Transcribe) -> ChatCompletionRequest:
    """The request with each `input_audio` part replaced by a text part holding its transcript."""
    found = request.parts("input_audio")
    if not found:
        return request
    messages = [m.model_dump(exclude_none=True) for m in request.messages]
    for i, j in found:
        param = f"messages[{i}].content[{j}].input_audio"
        given = messages[i]["content"][j].get("input_audio")
        if not isinstance(given, dict):
            raise InvalidRequestError(f"{param} must be {{data, format}}.", param=param)
        form = given.get("format")
        if form not in FORMATS:
            raise InvalidRequestError(
                f"{param}.format must be wav or mp3, not {form!r}.", param=f"{param}.format"
            )
        try:
            audio = base64.b64decode(str(given.get("data") or ""), validate=True)
        except (binascii.Error, ValueError):
            raise InvalidRequestError(f"{param}.data is not base64.", param=f"{param}.data") from None
        if not audio:
            raise InvalidRequestError(f"{param}.data is empty.", param=f"{param}.data")
        text = await transcribe(audio, str(form), param)
        messages[i]["content"][j] = {
            "type": "text",
            "text": f"<audio transcript>\n{text}\n</audio transcript>",
        }
    return request.model_copy(update={"messages": [ChatMessage.model_validate(m) for m in messages]})
