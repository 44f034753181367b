"""The seeded material of `bench.workload`: a shared agent system prompt and its tools, scripted agent
turns, documents to quote, a file to edit, free-chat questions. Same seed, same bytes, on every server."""

from __future__ import annotations

import json
import random

NOUNS = [
    "invoice",
    "refund",
    "order",
    "account",
    "shipment",
    "warehouse",
    "ticket",
    "customer",
    "supplier",
    "contract",
    "payment",
    "region",
    "report",
    "policy",
    "device",
    "sensor",
    "reading",
    "alert",
    "schedule",
    "meeting",
    "budget",
    "forecast",
]
VERBS = [
    "checks",
    "updates",
    "records",
    "approves",
    "rejects",
    "escalates",
    "archives",
    "forwards",
    "reviews",
    "cancels",
]
ADJECTIVES = [
    "pending",
    "urgent",
    "overdue",
    "regional",
    "annual",
    "verified",
    "flagged",
    "partial",
    "duplicate",
]
PLACES = ["Lisbon", "Oslo", "Nairobi", "Lima", "Osaka", "Denver", "Tallinn", "Perth", "Quebec", "Seville"]


def sentence(rng: random.Random) -> str:
    return (
        f"The {rng.choice(ADJECTIVES)} {rng.choice(NOUNS)} team in {rng.choice(PLACES)} "
        f"{rng.choice(VERBS)} every {rng.choice(NOUNS)} within {rng.randint(2, 90)} days, "
        f"unless the {rng.choice(NOUNS)} is {rng.choice(ADJECTIVES)}."
    )


def paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(sentence(rng) for _ in range(sentences))


def system_prompt(seed: int = 1) -> str:
    """~1,500 tokens of operating policy and six tools, the same for every agent conversation."""
    rng = random.Random(seed)
    sections = [f"## Rule {i + 1}\n{paragraph(rng, 3)}" for i in range(16)]
    tools = "\n".join(json.dumps(tool) for tool in TOOLS)
    return (
        "You are the operations agent of Example Corp. Follow these rules.\n\n"
        + "\n\n".join(sections)
        + f"\n\n## Tools\nTo call a tool, answer with its name and JSON arguments.\n{tools}"
    )


TOOLS = [
    {
        "name": name,
        "description": f"{name.replace('_', ' ').capitalize()} in Example Corp's systems.",
        "parameters": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "note": {"type": "string"}},
            "required": ["id"],
        },
    }
    for name in ("lookup_order", "issue_refund", "search_tickets", "update_account", "send_email", "report")
]


def agent_turns(conversation: int, turns: int) -> list[list[dict[str, str]]]:
    """The messages each turn of one conversation adds: a user request first, then the agent's previous
    tool call and the tool's result (~150 tokens) — the same script whatever the model answered. In plain
    text, as a template without tools renders them, so that every server sees the same prompt."""
    rng = random.Random(1000 + conversation)
    added = [[{"role": "user", "content": f"Case {conversation}: {sentence(rng)}"}]]
    for _ in range(1, turns):
        name = rng.choice(TOOLS)["name"]
        arguments = json.dumps({"id": f"{rng.choice(NOUNS)}-{rng.randint(100, 999)}"})
        added.append(
            [
                {"role": "assistant", "content": f"{name} {arguments}"},
                {"role": "user", "content": f"Result of {name}: {paragraph(rng, 5)}"},
            ]
        )
    return added


def documents(count: int, seed: int = 2) -> list[tuple[str, str]]:
    """`count` documents of ~2,000 tokens, each with the first words of a sentence to quote from it."""
    rng = random.Random(seed)
    found = []
    for _ in range(count):
        paragraphs = [paragraph(rng, 4) for _ in range(25)]
        target = paragraphs[rng.randrange(5, 20)]
        found.append(("\n\n".join(paragraphs), " ".join(target.split()[:8])))
    return found


def source_file(seed: int = 3) -> str:
    """A 150-line Python module of small functions."""
    rng = random.Random(seed)
    lines: list[str] = ['"""Order arithmetic."""', ""]
    index = 0
    while len(lines) < 148:
        a, b = rng.choice(NOUNS), rng.choice(NOUNS)
        lines += [
            f"def {a}_{b}_{index}(total: int, rate: float) -> float:",
            f'    """The {a} share of a {b}."""',
            f"    if total < {rng.randint(1, 50)}:",
            "        return 0.0",
            f"    return total * rate / {rng.randint(2, 9)}",
            "",
        ]
        index += 1
    return "\n".join(lines[:150]) + "\n"


def function_name(source: str, index: int) -> str:
    """The name of the (5 × index + 1)-th function defined in `source` (the functions a code edit renames)."""
    return source.split("def ", 1 + 5 * index)[-1].split("(", 1)[0]


QUESTIONS = [
    "What makes a good cup of tea?",
    "Explain why the sky is blue to a child.",
    "Give me three ideas for a rainy weekend.",
    "How do bicycles stay upright?",
    "Write a short poem about autumn leaves.",
    "What should I pack for a week of hiking?",
    "Describe the taste of a ripe mango.",
    "Why do cats purr?",
    "Suggest a name for a friendly robot and explain it.",
    "How does a refrigerator keep food cold?",
    "What are the rules of chess in brief?",
    "Tell me a fun fact about octopuses.",
    "How can I sleep better?",
    "Describe a busy market in the morning.",
    "What is the difference between weather and climate?",
    "Plan a simple dinner for four people.",
]
