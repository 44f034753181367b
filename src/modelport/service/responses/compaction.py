"""Compaction (`POST /v1/responses/compact`): a long conversation shrunk into its user messages and one
`compaction` item holding a summary the chat model wrote of everything else (answers, tool calls and
their results), which a later turn takes back as input. OpenAI's item carries the summary encrypted; on
the user's own machine it is the summary's text, readable. How faithful it is depends on the model: a
small one keeps the gist and drops detail, which is why the user's own words are kept whole."""

from __future__ import annotations

from typing import Any

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


def budget(messages: list[dict[str, Any]]) -> int:
    """The most tokens a summary of `messages` may take: half of what it replaces (the user's messages are
    kept whole, so the rest), at about four characters a token, 32 to 1,024, so that compacting never
    makes a conversation longer."""
    replaced = transcript([m for m in messages if m["role"] != "user"])
    return max(32, min(1024, len(replaced) // 8))


def user_messages(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The user's own messages, whole, as input items."""
    return [
        {"type": "message", "role": "user", "content": item["content"]}
        for item in items
        if item.get("type", "message") == "message" and item.get("role") == "user"
    ]
