"""Compaction: a long conversation shrunk into a `compaction` item holding a summary the chat model wrote
of it, which a later turn takes back as input. OpenAI's item carries the summary encrypted; on the user's
own machine it is the summary's text, readable. How faithful it is depends on the model: a small one keeps
the gist and drops detail.

Three ways to it: `POST /v1/responses/compact` (the conversation's user messages kept whole beside the
item); a turn whose input ends in a `compaction_trigger` item (the item is the turn's one output); and
server-side compaction (`context_management`), where a turn whose rendered input crosses
`compact_threshold` tokens (or, without one, does not fit the model) first compacts its context into the
item, the first of its output, and then answers from the item and the turn's own messages (and, where the
results of tools the server runs take it there, compacts before the model's next round). A stored
conversation (a chain of `previous_response_id`, a Conversation) is read from its latest compaction item
on, as OpenAI's clients that prune their input before it expect; input a client sends is read as sent."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from modelport.protocol.requests import ChatCompletionRequest
from modelport.protocol.response_request import ContextManagement
from modelport.service.responses.items import messages

# Asked after the conversation, not before it in a system message: small models follow an instruction
# that comes last, and lose one that came before a long text (SmolLM2-135M wrote a story about the people in
# it when asked first, a summary of it when asked last).
ASK = (
    "Summarize the conversation above in a few sentences, keeping every name, place, number, decision "
    "and tool result."
)


def prompt(said: str, instructions: str | None) -> str:
    """What the summariser is asked: the conversation, then the instruction."""
    context = f"The assistant worked under these instructions: {instructions}\n\n" if instructions else ""
    return f"{context}The conversation:\n{said}\n\n{ASK}"


def transcript(messages: list[dict[str, Any]]) -> str:
    """A conversation's chat messages as plain text for the summariser: who said what, and each tool call
    and its result."""
    lines = []
    for message in messages:
        for call in message.get("tool_calls") or []:
            lines.append(f"Assistant called {call['function']['name']}({call['function']['arguments']}).")
        content = message.get("content")
        if isinstance(content, list):
            content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if content:
            speaker = "Tool result" if message["role"] == "tool" else message["role"].capitalize()
            lines.append(f"{speaker}: {content}")
    return "\n".join(lines)


def budget(messages: list[dict[str, Any]], users_kept: bool = True) -> int:
    """The most tokens a summary of `messages` may take: half of what it replaces (the rest, where the
    user's messages are kept whole beside it: `users_kept`), at about four characters a token, 32 to 1,024,
    so that compacting never makes a conversation longer."""
    replaced = transcript([m for m in messages if m["role"] != "user" or not users_kept])
    return max(32, min(1024, len(replaced) // 8))


def user_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user's own messages, whole, as input items."""
    return [
        {"type": "message", "role": "user", "content": item["content"]}
        for item in items
        if item.get("type", "message") == "message" and item.get("role") == "user"
    ]


# The kinds of a turn's input items that a compacted turn still reads whole after the summary, where they
# end it: what the user and the developer said, and the tools the turn adds. Calls, their outputs and the
# assistant's words, and all that came before them, the summary holds.
_KEPT = ("message", "additional_tools", "tool_search_output")
# Leeway beside a chat request's JSON in `may_cross`: a tool description modelport writes into the prompt.
_PROMPT_LEEWAY = 1024


@dataclass(frozen=True)
class Compacting:
    """A turn's compaction: `covered`, the chat messages the summary replaces (the stored context and the
    turn's input); `kept`, the input items the turn reads whole after it; `threshold`, the rendered input
    tokens from which the turn compacts first (None: only when it does not fit); `only`, whether the turn
    compacts and answers nothing (a `compaction_trigger`); `first`, whether it may compact before its
    first round (a first turn of the user's own words may not: a summary of it would only add to it; it
    may still compact between rounds of tools the server runs, once their results have grown it)."""

    covered: list[dict[str, Any]]
    kept: list[dict[str, Any]]
    threshold: int | None
    only: bool = False
    first: bool = True


def asked(
    history: list[dict[str, Any]], turn: list[dict[str, Any]], configured: ContextManagement | None
) -> Compacting | None:
    """The turn's compaction, if it asks for one: a final `compaction_trigger`, or `context_management`
    (`configured`, with its threshold). `history` is the stored context as chat messages."""
    if triggered(turn):
        return Compacting(history + messages(turn[:-1]), [], None, only=True)
    if configured is None:
        return None
    kept = _since_the_model_spoke(turn)
    first = bool(history) or len(kept) < len(turn)  # else the turn is what the user said, all of it
    return Compacting(history + messages(turn), kept, configured.compact_threshold, first=first)


def _since_the_model_spoke(turn: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items at the end of the turn's input after the last the model wrote or a tool gave (the whole
    input of a turn that goes on from a stored one; of a client that sends the whole conversation, its
    newest messages)."""
    start = len(turn)
    while (
        start
        and turn[start - 1].get("type", "message") in _KEPT
        and turn[start - 1].get("role") != "assistant"
    ):
        start -= 1
    return turn[start:]


def triggered(turn: list[dict[str, Any]]) -> bool:
    """Whether the turn's input ends in a `compaction_trigger` (the only place it may be)."""
    return bool(turn) and turn[-1].get("type") == "compaction_trigger"


def latest(held: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A stored conversation's items from its latest compaction item on (all of them without one)."""
    found = [i for i, item in enumerate(held) if item.get("type") == "compaction"]
    return held[found[-1] :] if found else held


def may_cross(chat: ChatCompletionRequest, threshold: int) -> bool:
    """Whether the chat request's prompt may be `threshold` tokens or more. A token of a byte-level
    vocabulary (or one with byte fallback) is at least one byte, so the request's JSON in UTF-8 (which
    spells each message's role and content at greater length than a template marks them) bounds it, but
    for a tool description modelport writes into the prompt; below that, counting would only cost a
    request."""
    sent = chat.model_dump(mode="json", include={"messages", "tools"}, exclude_none=True)
    return len(json.dumps(sent, ensure_ascii=False).encode()) + _PROMPT_LEEWAY >= threshold


def item(item_id: str, summary: str) -> dict[str, Any]:
    """The compaction item of a summary."""
    return {"id": item_id, "type": "compaction", "encrypted_content": summary, "created_by": "modelport"}


def shortened(said: str) -> str | None:
    """The transcript with its oldest quarter of lines left out, for a summariser it did not fit; of one
    line left (a tool's long output), its first quarter; None once nothing is left to cut."""
    lines = said.split("\n")
    if len(lines) > 1:
        return "\n".join(lines[len(lines) // 4 or 1 :])
    return said[len(said) // 4 :] if len(said) >= 64 else None
