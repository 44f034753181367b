"""One realtime response: the conversation as a streamed chat request to the pipeline's chat model, its
text sent as it comes (as text, or as the transcript of audio), its audio spoken clause by clause by the
speech model while the text goes on and sent in pieces of ~100 ms, its tool calls as function-call items;
then `response.done` with the usage. Cancelled (`response.cancel`, or the user speaking over it), what was
said so far stays, marked incomplete."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from openai.types.realtime import RealtimeServerEvent

from modelport.errors import ModelportError, ServerError
from modelport.ids import new_id
from modelport.protocol.answers import Events
from modelport.protocol.chunk_folds import ChatFold
from modelport.protocol.requests import ChatCompletionRequest
from modelport.protocol.validation import json_value
from modelport.service.audio.clauses import Clauses
from modelport.service.generation.tools.flat import chat_choice, chat_function, chat_request
from modelport.service.realtime import config
from modelport.service.realtime.audio import Speaker
from modelport.service.realtime.conversation import Conversation, Entry, Spoken
from modelport.service.realtime.pipes import Pipes
from modelport.service.realtime.playout import Playout
from modelport.service.realtime.realtime_events import ClientEventError, error_event, server_event
from modelport.settings import RealtimePipeline

log = logging.getLogger("modelport.realtime")

_PIECE_SECONDS = 0.1  # audio deltas carry about this much each


class Host(Protocol):
    """The session a response runs in."""

    pipeline: RealtimePipeline
    session: config.Session
    conversation: Conversation
    pipes: Pipes
    playout: Playout | None

    async def send(self, event: RealtimeServerEvent) -> None: ...


@dataclass
class _Output:
    """An output item as it is made."""

    entry: Entry
    index: int
    text: str = ""
    clauses: Clauses = field(default_factory=Clauses)
    call_index: int | None = None


class RealtimeResponse:
    """A response being made; `cancel` stops it, and it still ends with `response.done`."""

    def __init__(self, host: Host, params: dict[str, Any]) -> None:
        self.host = host
        self.params = params
        self.id = new_id("resp", "_")
        self.reason = "client_cancelled"
        session = host.session
        self.modalities = params.get("output_modalities") or session.get("output_modalities") or ["audio"]
        audio = (params.get("audio") or {}).get("output") or {}
        self.format = dict(audio.get("format") or config.output_format(session))
        given_voice = audio.get("voice") or config.voice(session)
        self.voice = str(given_voice.get("id") if isinstance(given_voice, dict) else given_voice)
        self.speed = float(((session.get("audio") or {}).get("output") or {}).get("speed") or 1.0)
        self.in_conversation = params.get("conversation", "auto") != "none"
        self.outputs: list[_Output] = []
        self.usage: dict[str, Any] = {}
        self.task: asyncio.Task[None] | None = None
        # Set as `response.done` goes out: a client may create the next response as soon as it reads it,
        # before this one's task has returned to the session.
        self.ended = False
        # The answer so far, folded by the accumulator every chat stream shares: each call's whole name
        # and arguments come from it, not from pieces added up here.
        self.fold = ChatFold()

    def start(self) -> asyncio.Task[None]:
        self.task = asyncio.create_task(self._run())
        return self.task

    def cancel(self, reason: str) -> None:
        self.reason = reason
        if self.task is not None:
            self.task.cancel()

    def _shape(self, status: str) -> dict[str, Any]:
        shape: dict[str, Any] = {
            "id": self.id,
            "object": "realtime.response",
            "status": status,
            "output": [o.entry.item for o in self.outputs],
            "output_modalities": self.modalities,
            "conversation_id": "conv_default" if self.in_conversation else None,
            "audio": {"output": {"format": self.format, "voice": self.voice}},
            "max_output_tokens": self.params.get("max_output_tokens")
            or self.host.session.get("max_output_tokens")
            or "inf",
        }
        if self.params.get("metadata") is not None:
            shape["metadata"] = self.params["metadata"]
        return shape

    async def _run(self) -> None:
        await self.host.send(server_event("response.created", response=self._shape("in_progress")))
        status: str = "completed"
        details: dict[str, Any] | None = None
        speaking: asyncio.Task[None] | None = None
        clauses: asyncio.Queue[tuple[_Output, str] | None] = asyncio.Queue()
        try:
            request = await self._request()
            answer = await self.host.pipes.chat(request)
            assert isinstance(answer, Events)
            if "audio" in self.modalities:
                speaking = asyncio.create_task(self._speak(clauses))
            finish = None
            try:
                async for chunk in answer.items:
                    self.fold.add(chunk)
                    self.usage = chunk.get("usage") or self.usage
                    for choice in chunk.get("choices") or []:
                        await self._take(choice.get("delta") or {}, clauses)
                        finish = choice.get("finish_reason") or finish
            finally:
                await answer.items.aclose()
            for output in self.outputs:
                for clause in output.clauses.rest():
                    clauses.put_nowait((output, clause))
            clauses.put_nowait(None)
            if speaking is not None:
                await speaking
            if finish == "length":
                status, details = "incomplete", {"type": "incomplete", "reason": "max_output_tokens"}
        except asyncio.CancelledError:
            status, details = "cancelled", {"type": "cancelled", "reason": self.reason}
        except Exception as caught:
            # A model's failure, a request it refused, or a fault of the server's own ends the response (with
            # the `response.done` its client waits for), not the session.
            error = caught if isinstance(caught, (ClientEventError, ModelportError)) else None
            if error is None:
                log.error("realtime response %s failed", self.id, exc_info=caught)
                error = ServerError(f"Internal error: {type(caught).__name__}")
            event = error_event(error)
            status = "failed"
            details = {"type": "failed", "error": {"type": event.error.type, "code": event.error.code}}
            await self.host.send(event)
        finally:
            if speaking is not None and not speaking.done():
                speaking.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await speaking
        # A second cancel (the user speaks again) must not stop the answer from being closed.
        await asyncio.shield(self._finish(status, details))

    async def _request(self) -> ChatCompletionRequest:
        session, params = self.host.session, self.params
        conversation = self.host.conversation
        # `input` is the whole context of this response when given, as OpenAI reads it.
        given_input = params.get("input")
        entries = list(conversation.entries) if self.in_conversation and given_input is None else []
        for i, given in enumerate(given_input or []):
            if isinstance(given, dict) and given.get("type") == "item_reference":
                found = conversation.find(str(given.get("id")))
                if found is None:
                    raise ClientEventError(
                        f"Item with item_id '{given.get('id')}' does not exist.",
                        code="item_not_found",
                        param=f"response.input[{i}].id",
                    )
                entries.append(found)
            else:
                entries.append(Entry(conversation.checked(given, f"response.input[{i}]")))
        instructions = params.get("instructions") or session.get("instructions")
        tools = params.get("tools") if params.get("tools") is not None else session.get("tools")
        choice = chat_choice(params.get("tool_choice") or session.get("tool_choice") or "auto") or "auto"
        fields: dict[str, Any] = {}
        if tools:
            fields["tools"] = [chat_function(tool) for tool in tools]
            fields["tool_choice"] = choice
            parallel = params.get("parallel_tool_calls", session.get("parallel_tool_calls"))
            if parallel is not None:
                fields["parallel_tool_calls"] = parallel
        limit = params.get("max_output_tokens") or session.get("max_output_tokens")
        # `inf` is the model's most, as OpenAI bounds it (4096): not the rest of the context.
        most = self.host.pipeline.max_output_tokens
        fields["max_completion_tokens"] = limit if isinstance(limit, int) else most
        messages = await conversation.messages(entries)
        return chat_request(
            self.host.pipeline.chat, instructions, messages, fields, stream=True, param="response"
        )

    async def _take(self, delta: dict[str, Any], clauses: asyncio.Queue[tuple[_Output, str] | None]) -> None:
        text = delta.get("content")
        if text:
            output = self._message() or await self._open_message()
            output.text += text
            kind = "output_audio_transcript" if "audio" in self.modalities else "output_text"
            await self.host.send(server_event(f"response.{kind}.delta", **self._where(output), delta=text))
            if "audio" in self.modalities:
                for clause in output.clauses.add(text):
                    clauses.put_nowait((output, clause))
        for call in delta.get("tool_calls") or []:
            index = call.get("index", 0)
            whole = self._whole_call(index)
            output = next((o for o in self.outputs if o.call_index == index), None) or await self._open(
                {
                    "type": "function_call",
                    "call_id": whole.get("id") or new_id("call", "_"),
                    "name": "",
                    "arguments": "",
                }
            )
            output.call_index = index
            function = call.get("function") or {}
            output.entry.item["name"] = (whole.get("function") or {}).get("name") or ""
            output.entry.item["arguments"] = (whole.get("function") or {}).get("arguments") or ""
            if function.get("arguments"):
                await self.host.send(
                    server_event(
                        "response.function_call_arguments.delta",
                        response_id=self.id,
                        item_id=output.entry.item["id"],
                        output_index=output.index,
                        call_id=output.entry.item["call_id"],
                        delta=function["arguments"],
                    )
                )

    def _whole_call(self, index: int) -> dict[str, Any]:
        """The call at `index` as the fold has it so far (this chunk's piece in it already)."""
        calls = self.fold.choice(0)["message"].get("tool_calls") or []
        return next((c for c in calls if c.get("index") == index), {})

    def _message(self) -> _Output | None:
        return next((o for o in self.outputs if o.entry.item["type"] == "message"), None)

    async def _open_message(self) -> _Output:
        audio = "audio" in self.modalities
        content = {"type": "output_audio", "transcript": ""} if audio else {"type": "output_text", "text": ""}
        output = await self._open({"type": "message", "role": "assistant", "content": [content]})
        part = {"type": "audio", "transcript": ""} if audio else {"type": "text", "text": ""}
        await self.host.send(server_event("response.content_part.added", **self._where(output), part=part))
        return output

    async def _open(self, item: dict[str, Any]) -> _Output:
        item = {"id": new_id("item", "_"), "object": "realtime.item", "status": "in_progress", **item}
        output = _Output(Entry(item), len(self.outputs))
        self.outputs.append(output)
        await self.host.send(
            server_event(
                "response.output_item.added", response_id=self.id, output_index=output.index, item=item
            )
        )
        if self.in_conversation:
            previous = self.host.conversation.add(output.entry)
            await self.host.send(
                server_event("conversation.item.added", item=item, previous_item_id=previous)
            )
        return output

    def _where(self, output: _Output) -> dict[str, Any]:
        return {
            "response_id": self.id,
            "item_id": output.entry.item["id"],
            "output_index": output.index,
            "content_index": 0,
        }

    async def _speak(self, clauses: asyncio.Queue[tuple[_Output, str] | None]) -> None:
        playout = self.host.playout
        if playout is not None:  # the transport plays the audio: no deltas
            while (taken := await clauses.get()) is not None:
                output, clause = taken
                pcm = await self.host.pipes.speak(clause, self.voice, self.speed)
                playout.play(self.id, output.entry.item["id"], pcm)
                start = output.entry.spoken[-1].end_ms if output.entry.spoken else 0.0
                ends = start + len(pcm) / 48  # 16-bit at 24 kHz: 48 bytes a millisecond
                output.entry.spoken.append(Spoken(clause, ends))
            return
        speaker = Speaker(str(self.format.get("type") or "audio/pcm"))
        piece = int(speaker.rate * _PIECE_SECONDS) * (2 if speaker.fmt == "audio/pcm" else 1)
        last: _Output | None = None
        while (taken := await clauses.get()) is not None:
            output, clause = taken
            last = output
            pcm = await self.host.pipes.speak(clause, self.voice, self.speed)
            encoded = speaker.encode(pcm)
            ends = (output.entry.spoken[-1].end_ms if output.entry.spoken else 0.0) + speaker.seconds(
                encoded
            ) * 1000
            for at in range(0, len(encoded), piece):
                chunk = encoded[at : at + piece]
                await self.host.send(
                    server_event("response.output_audio.delta", **self._where(output), delta=_b64(chunk))
                )
            output.entry.spoken.append(Spoken(clause, ends))
        tail = speaker.flush()
        if tail and last is not None:
            await self.host.send(
                server_event("response.output_audio.delta", **self._where(last), delta=_b64(tail))
            )

    async def _finish(self, status: str, details: dict[str, Any] | None) -> None:
        ended = "completed" if status == "completed" else "incomplete"
        for output in self.outputs:
            item = output.entry.item
            item["status"] = ended
            if item["type"] == "message":
                await self._close_message(output, cut=status in ("cancelled", "failed"))
            else:
                if status == "completed" or _whole_json(item["arguments"]):  # a cut call is not done
                    await self.host.send(
                        server_event(
                            "response.function_call_arguments.done",
                            response_id=self.id,
                            item_id=item["id"],
                            output_index=output.index,
                            call_id=item["call_id"],
                            name=item["name"],
                            arguments=item["arguments"] or "{}",
                        )
                    )
            await self.host.send(
                server_event(
                    "response.output_item.done", response_id=self.id, output_index=output.index, item=item
                )
            )
            if self.in_conversation:
                await self.host.send(server_event("conversation.item.done", item=item))
        done = self._shape(status)
        if details is not None:
            done["status_details"] = details
        if self.usage:
            done["usage"] = _usage(self.usage)
        if self.host.playout is not None:
            self.host.playout.finished(self.id)
        self.ended = True
        await self.host.send(server_event("response.done", response=done))

    async def _close_message(self, output: _Output, *, cut: bool) -> None:
        content = output.entry.item["content"][0]
        if "audio" in self.modalities:
            # What was spoken is what stays: a cancelled answer keeps the clauses whose audio went out.
            said = " ".join(c.text for c in output.entry.spoken) if cut else output.text
            content["transcript"] = said
            await self.host.send(server_event("response.output_audio.done", **self._where(output)))
            await self.host.send(
                server_event("response.output_audio_transcript.done", **self._where(output), transcript=said)
            )
            part = {"type": "audio", "transcript": said}
        else:
            content["text"] = output.text
            await self.host.send(
                server_event("response.output_text.done", **self._where(output), text=output.text)
            )
            part = {"type": "text", "text": output.text}
        await self.host.send(server_event("response.content_part.done", **self._where(output), part=part))


def _usage(usage: dict[str, Any]) -> dict[str, Any]:
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
        "input_token_details": {"text_tokens": prompt, "audio_tokens": 0, "cached_tokens": cached},
        "output_token_details": {"text_tokens": completion, "audio_tokens": 0},
    }


def _whole_json(text: str) -> bool:
    try:
        json_value(text)
    except ValueError:
        return False
    return True


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
