"""Conversations behind one shared system prompt, more of them than slots: each later turn starts from its
own whole history, whichever conversations ran in between."""

from __future__ import annotations

from typing import Any

import modelport
from modelport.settings import ModelConfig, Settings

SYSTEM = "You are a terse assistant for a warehouse. " + " ".join(
    f"Rule {i}: shelf {i} holds item {i * 7 % 50} and is checked every {i % 5 + 1} days." for i in range(40)
)


def client(**options: Any) -> modelport.OpenAI:
    model = ModelConfig(
        id="m", engine="llamacpp", n_parallel=2, **{"conversation_cache_mib": 1024, **options}
    )
    settings = Settings(defaults=False, models=[model], store={"url": "none"})  # type: ignore[arg-type]
    return modelport.OpenAI(settings=settings)


def interleaved(model: modelport.OpenAI, conversations: int, turns: int) -> list[tuple[int, int, int]]:
    """Each turn of each conversation in round-robin order: (earlier prompt tokens, prompt tokens,
    cached tokens); the earlier prompt is that of the conversation's previous turn."""
    histories: list[list[dict[str, str]]] = [
        [{"role": "system", "content": SYSTEM}] for _ in range(conversations)
    ]
    earlier = [0] * conversations
    seen = []
    for turn in range(turns):
        for c, history in enumerate(histories):
            history.append(
                {"role": "user", "content": f"Conversation {c}, question {turn}: where is item {c + turn}?"}
            )
            reply = model.chat.completions.create(model="m", messages=history, max_tokens=8, temperature=0)  # type: ignore[arg-type]
            history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
            usage = reply.usage
            assert usage is not None
            assert usage.prompt_tokens_details is not None
            seen.append((earlier[c], usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0))
            earlier[c] = usage.prompt_tokens
    return seen


def test_every_later_turn_reuses_its_whole_history_though_others_took_its_slot() -> None:
    with client() as model:
        turns = interleaved(model, conversations=3, turns=3)
    for earlier, prompt, cached in turns[3:]:
        assert earlier <= cached < prompt  # the earlier prompt (and more: part of the answer) was reused


def test_without_the_conversation_cache_a_later_turn_reuses_only_what_all_share() -> None:
    with client(conversation_cache_mib=0) as model:
        turns = interleaved(model, conversations=3, turns=2)
    assert all(cached < earlier for earlier, _, cached in turns[3:])
