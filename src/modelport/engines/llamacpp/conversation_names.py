"""The names the conversation cache files saved turns under: one for each prefix of a request's prompt
(whole chat messages, pieces of a long one, pieces of a completion's prompt), so that a later request
sharing a prefix finds the turn that holds it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

PROMPT_PIECE = 512  # characters (or token ids) of a completion's prompt per name


def message_names(request: dict[str, Any], preamble: bool = False) -> list[str]:
    """A name for each prefix of a chat request's messages, shortest first, each depending on what else
    shapes the prompt (template variables such as the tools): at the end of each message, and within a
    long one every `PROMPT_PIECE` characters. A message may share a long beginning with another: a system
    prompt with the tools' description added at its end (where a call is asked for, not where it is
    barred), or the day's date; whole messages alone found nothing to restore, and such a turn processed
    its whole prompt again where llama.cpp reuses every token two prompts share. A message is written role
    first, as templates render it, and ends with what closes it, so that no message's end is a beginning
    of another. Where tools are offered, or the template writes a long text before the messages
    (`preamble`: GigaChat's roles, Command R's safety text), the prompt's beginning before any message is
    named too: a template may describe the tools there (Qwen3's, with no system message), and a new
    conversation offered the same tools then finds a turn that holds their description (1,600 tokens for
    16 tools: 5 s of SmolLM2 on two cores)."""
    pieces: list[str] = []
    for message in request["messages"]:
        rest = {key: value for key, value in message.items() if key not in ("role", "content")}
        text = json.dumps([message.get("role"), message.get("content"), rest], sort_keys=True)
        pieces.extend(text[at : at + PROMPT_PIECE] for at in range(0, len(text), PROMPT_PIECE))
    context = request.get("chat_template_kwargs")
    bare = preamble or bool(context and context.get("tools"))
    return _names(json.dumps(context, sort_keys=True), pieces, bare)


def prompt_names(request: dict[str, Any]) -> list[str]:
    """A name for each prefix of a completion's prompt that ends at a multiple of `PROMPT_PIECE` characters
    (or token ids), shortest first: a later prompt sharing a long prefix finds the turn, of which
    llama.cpp then reuses every token the two share."""
    prompt = request["prompt"]
    pieces = (json.dumps(prompt[at : at + PROMPT_PIECE]) for at in range(0, len(prompt), PROMPT_PIECE))
    return _names("prompt", pieces)


def _names(context: str, pieces: Iterable[str], bare: bool = False) -> list[str]:
    """A name for each prefix, shortest first (the context alone first, where `bare`)."""
    digest = hashlib.sha256(context.encode())
    names = [digest.hexdigest()[:40]] if bare else []
    for piece in pieces:
        digest.update(piece.encode())
        names.append(digest.hexdigest()[:40])
    return names
