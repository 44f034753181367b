"""Conversations behind one shared system prompt, more of them than slots: each later turn starts from its
own whole history, whichever conversations ran in between.

What is checked is which tokens a turn reuses and how it began, never what the model says: the model is
SmolLM2's first blocks (`families.FIRST_BLOCKS`), which reads a prompt seven times as fast as the whole."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types import CompletionUsage

from modelport.engines.llamacpp import conversation_cache, conversation_names
from tests.support.configs import NO_EOS
from tests.support.families import FIRST_BLOCKS, repack
from tests.support.live import configured_server, counted, counted_by, emptied_past

pytestmark = pytest.mark.models  # real models: not the unit tier

SYSTEM = "You are a terse assistant for a warehouse. " + " ".join(
    f"Rule {i}: shelf {i} holds item {i * 7 % 50} and is checked every {i % 5 + 1} days." for i in range(16)
)


CONFIG = """defaults = false
[[models]]
id = "m"
engine = "llamacpp"
path = "{path}"
n_parallel = 2
conversation_cache_mib = {mib}
"""


@pytest.fixture(scope="module")
def shallow(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2's GGUF cut to its first blocks."""
    return repack("smollm2", tmp_path_factory.mktemp("shallow"), layers=FIRST_BLOCKS)


def configured(shallow: Path, mib: int) -> str:
    """A server's configuration: two slots of `shallow`, a conversation cache of `mib` MiB (0: none)."""
    return CONFIG.format(path=shallow, mib=mib)


@contextmanager
def client(folder: Path, config: str) -> Iterator[openai.OpenAI]:
    """The SDK over HTTP to a server of its own (its llama.cpp slots are the subject)."""
    with configured_server(folder, config) as live:
        yield openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)


@contextmanager
def answering_beside(model: openai.OpenAI) -> Iterator[None]:
    """A long answer under way in a slot of its own while the block runs, and still running when it ends
    (asserted). It is streamed, so the block starts once it is under way, and closed after the block; it
    runs to a length no block reaches (`ignore_eos`: no end, no repetition stop), whatever the machine's
    speed. Before, a fixed wait and a 200-token greedy answer, which the repetition stop or a quiet machine
    ended before the block did."""
    under_way, leave = threading.Event(), threading.Event()
    ended: list[str] = []

    def answer() -> None:
        with model.completions.create(
            model="m", prompt="Tell a long story about a ship.", max_tokens=4096, stream=True,
            extra_body={"ignore_eos": True},
        ) as stream:  # fmt: skip
            for chunk in stream:
                under_way.set()
                ended.extend(choice.finish_reason for choice in chunk.choices if choice.finish_reason)
                if leave.is_set():
                    return

    with ThreadPoolExecutor(1) as other:
        running = other.submit(answer)
        while not under_way.wait(0.05):
            assert not running.done(), running.result()
        try:
            yield
            assert not ended, "the long answer ended before the block did"
        finally:
            leave.set()
            running.result()


def cached_tokens(model: openai.OpenAI, prompt: str) -> int:
    """The prompt tokens a short greedy completion of `prompt` reused."""
    usage = model.completions.create(
        model="m", prompt=prompt, max_tokens=4, temperature=0, logit_bias=NO_EOS
    ).usage
    assert usage is not None
    assert usage.prompt_tokens_details is not None
    return usage.prompt_tokens_details.cached_tokens or 0


def next_turn(
    model: openai.OpenAI, history: list[dict[str, str]], question: str, tokens: int = 8
) -> CompletionUsage:
    """Ask `question` after `history`, which the question and its greedy answer then join; its usage."""
    history.append({"role": "user", "content": question})
    reply = model.chat.completions.create(model="m", messages=history, max_tokens=tokens, temperature=0)  # type: ignore[arg-type]
    history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
    assert reply.usage is not None
    assert reply.usage.prompt_tokens_details is not None
    return reply.usage


def interleaved(model: openai.OpenAI, conversations: int, turns: int) -> list[tuple[int, int, int]]:
    """Each turn of each conversation in round-robin order: (earlier prompt tokens, prompt tokens,
    cached tokens); the earlier prompt is that of the conversation's previous turn."""
    histories: list[list[dict[str, str]]] = [
        [{"role": "system", "content": SYSTEM}] for _ in range(conversations)
    ]
    earlier = [0] * conversations
    seen = []
    for turn in range(turns):
        for c, history in enumerate(histories):
            usage = next_turn(model, history, f"Conversation {c}, question {turn}: where is item {c + turn}?")
            assert usage.prompt_tokens_details is not None
            seen.append((earlier[c], usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0))
            earlier[c] = usage.prompt_tokens
    return seen


def test_every_later_turn_reuses_its_whole_history_though_others_took_its_slot(
    tmp_path: Path, shallow: Path
) -> None:
    with client(tmp_path, configured(shallow, 1024)) as model:
        turns = interleaved(model, conversations=3, turns=3)
    for earlier, prompt, cached in turns[3:]:
        assert earlier <= cached < prompt  # the earlier prompt (and more: part of the answer) was reused


def test_a_turn_sent_as_the_last_answer_ends_reuses_that_answer_while_another_conversation_runs(
    tmp_path: Path,
    shallow: Path,
) -> None:
    """An answer's slot is saved after its end has been told: a next turn sent at once, while another
    conversation holds the other slot, finds the history it continues (waiting for its save if it must)."""
    with client(tmp_path, configured(shallow, 1024)) as model:

        def converse(label: str) -> list[tuple[int, int]]:
            history = [{"role": "system", "content": SYSTEM}]
            seen = []
            for turn in range(4):
                history.append(
                    {"role": "user", "content": f"{label}, question {turn}: where is item {turn}?"}
                )
                ask = model.chat.completions.create
                reply = ask(model="m", messages=history, max_tokens=8, temperature=0)  # type: ignore[arg-type]
                history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
                assert reply.usage is not None
                assert reply.usage.prompt_tokens_details is not None
                seen.append((reply.usage.prompt_tokens, reply.usage.prompt_tokens_details.cached_tokens or 0))
            return seen

        with ThreadPoolExecutor(2) as pool:
            both = list(pool.map(converse, ["Conversation A", "Conversation B"]))
    for seen in both:
        for (earlier, _), (prompt, cached) in itertools.pairwise(seen):
            assert earlier <= cached < prompt


def test_without_the_conversation_cache_a_later_turn_reuses_only_what_all_share(
    tmp_path: Path, shallow: Path
) -> None:
    with client(tmp_path, configured(shallow, 0)) as model:
        turns = interleaved(model, conversations=3, turns=2)
    assert all(cached < earlier for earlier, _, cached in turns[3:])


def test_folders_left_by_processes_that_are_gone_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = tmp_path / f"modelport-slots-{gone.pid}-abc"
    left.mkdir()
    (left / "turn.bin").write_bytes(b"saved")
    mine = tmp_path / f"modelport-slots-{os.getpid()}-def"
    mine.mkdir()
    made = conversation_cache.folder(1 << 60)  # no /dev/shm has room for that: made in the temporary folder
    assert not left.exists()
    assert mine.exists()
    assert made.parent == tmp_path
    assert made.name.startswith(f"modelport-slots-{os.getpid()}-")


def test_a_completion_reuses_a_long_prompt_it_shares_with_an_earlier_one_though_others_ran_between(
    tmp_path: Path,
    shallow: Path,
) -> None:
    """Completions are kept like chat turns: a few-shot prefix, sent again after other prompts took both
    slots, is not processed again."""
    with client(tmp_path, configured(shallow, 1024)) as model:
        shots = SYSTEM + "\nQ: where is the ladder?\nA:"

        def complete(prompt: str) -> tuple[int, int]:
            usage = model.completions.create(model="m", prompt=prompt, max_tokens=4, temperature=0).usage
            assert usage is not None
            assert usage.prompt_tokens_details is not None
            return usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0

        first, _ = complete(shots)
        for other in ("Once upon a time " * 60, "def main():\n    pass\n" * 40):
            complete(other)
        prompt, cached = complete(shots.replace("the ladder", "the broom"))
    assert first - 12 <= cached < prompt


def test_a_turn_reuses_a_long_system_prompt_another_turn_extended(tmp_path: Path, shallow: Path) -> None:
    """Offered tools are described at the end of the system prompt where a call may be made, and not
    where `tool_choice` is `none` (as an agent asks for its last answer): the turn that bars calls shares
    the system prompt's beginning, not the whole message, with the turn before it, and still reuses it."""
    tools: Any = [{"type": "function", "function": {"name": "shelf", "parameters": {"type": "object"}}}]
    asked: Any = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Where is item 7?"}]
    with client(tmp_path, configured(shallow, 1024)) as model:
        model.chat.completions.create(
            model="m", messages=asked, tools=tools, tool_choice="required", max_tokens=16
        )
        model.completions.create(model="m", prompt="Once upon a time " * 60, max_tokens=4)  # takes a slot
        usage = model.chat.completions.create(
            model="m", messages=asked, tools=tools, tool_choice="none", max_tokens=4
        ).usage
    assert usage is not None
    assert usage.prompt_tokens_details is not None
    assert usage.prompt_tokens - 24 <= (usage.prompt_tokens_details.cached_tokens or 0) < usage.prompt_tokens


def test_names_of_messages_are_shared_as_far_as_the_messages_are() -> None:
    """A prefix's name stands for the same beginning of the prompt wherever it comes from: two requests
    share the names of the pieces of a long message they share, and a message's end is never a piece of
    a longer one."""
    long, other = "a" * 2000, "b" * 10

    def names(*contents: str) -> list[str]:
        messages = [{"role": "system", "content": content} for content in contents]
        return conversation_names.message_names({"messages": messages})

    whole, extended = names(long), names(long + "and the tools")
    assert whole[:3] == extended[:3]
    assert whole[-1] not in extended
    assert set(names(long, other)) & set(names(long + other)) == set(whole[:3])
    assert names(long, other)[: len(whole)] == whole
    # Offered the same tools, two conversations share the name of what comes before their messages.
    tools = {"tools": [{"type": "function", "function": {"name": "shelf"}}]}

    def offered(content: str, kwargs: Any = tools) -> list[str]:
        messages = [{"role": "user", "content": content}]
        return conversation_names.message_names({"messages": messages, "chat_template_kwargs": kwargs})

    assert set(offered("a")) & set(offered("b")) == {offered("a")[0]}
    assert not set(offered("a")) & set(offered("b", {"tools": []}))
    assert not set(names("a")) & set(names("b"))


@pytest.mark.slow
def test_the_first_answer_after_a_start_is_the_one_a_start_without_the_cache_gives(
    tmp_path: Path, shallow: Path
) -> None:
    """Nothing run while the model loads stays in a slot: with the cache on, slots are emptied only by the
    turns placed in them, and tokens left in one changed the first greedy answers (this prompt's did). Nor
    does a turn resting in its slot (the last to end, kept there for its conversation's next turn): another
    request empties the slot first."""
    poem = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Write a poem about the shelves."},
    ]
    answers = []
    for mib in (1024, 0):
        (folder := tmp_path / str(mib)).mkdir()
        with client(folder, configured(shallow, mib)) as model:
            reply = model.chat.completions.create(model="m", messages=poem, max_tokens=128, temperature=0)  # type: ignore[arg-type]
            answers.append(reply.choices[0].message.content)
            if mib:  # a conversation sharing nothing with the poem rests in a slot; the poem again, whole
                other = [{"role": "user", "content": "Count the crates on the dock, one line each."}]
                model.chat.completions.create(model="m", messages=other, max_tokens=64, temperature=0)  # type: ignore[arg-type]
                # A seeded request processes its whole prompt (a restored one would batch it differently).
                again = model.chat.completions.create
                reply = again(model="m", messages=poem, max_tokens=128, temperature=0, seed=1)  # type: ignore[arg-type]
                answers.append(reply.choices[0].message.content)
    assert answers[0] == answers[1] == answers[2]


def test_a_conversation_s_next_turn_goes_on_in_the_slot_its_last_rests_in(
    tmp_path: Path, shallow: Path
) -> None:
    """The last turn to end while no other runs rests in its slot: its conversation's next turn goes on
    there, restoring nothing, sent at once (the rest not yet saved) or after the rest was saved; another
    conversation goes on in that slot from the system prompt they share, and a request sharing less
    begins in an emptied slot; neither saves a saved rest again, and the conversation's next turn is then
    restored from its file."""
    with configured_server(tmp_path, configured(shallow, 1024)) as live:
        model = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)
        history = [{"role": "system", "content": SYSTEM}]
        seen: list[tuple[int, int]] = []  # (prompt tokens, cached tokens) of each turn

        def turn(question: str) -> str:
            """How the conversation's next turn began (the metrics read once before and once after: a
            slow machine's reads would otherwise outlast a rest's unsaved time)."""
            before = starts()
            history.append({"role": "user", "content": question})
            reply = model.chat.completions.create(model="m", messages=history, max_tokens=8, temperature=0)  # type: ignore[arg-type]
            history.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
            assert reply.usage is not None
            assert reply.usage.prompt_tokens_details is not None
            seen.append((reply.usage.prompt_tokens, reply.usage.prompt_tokens_details.cached_tokens or 0))
            after = starts()
            (start,) = (start for start, count in after.items() if count == before.get(start, 0.0) + 1)
            return start

        def starts() -> dict[str, float]:
            """How many turns began each way so far."""
            return counted_by(live.url, "modelport_conversation_turns_total", "start")

        def began(start: str) -> float:
            return counted(live.url, "modelport_conversation_turns_total", start=start)

        def saved(at_least: float) -> float:
            """The saves counted, once `at_least` (a rest is saved `REST_UNSAVED` s after it began)."""
            deadline = time.monotonic() + 30
            while (count := counted(live.url, "modelport_conversation_saves_total")) < at_least:
                assert time.monotonic() < deadline, f"{count} saves, not {at_least}"
                time.sleep(0.1)
            return count

        assert turn("Where is item 3?") == "fresh"
        sent = time.monotonic()
        assert turn("And item 4?") == "resumed"  # sent at once
        # The saves so far: the rest of item 3's turn, if a slow machine let it rest its time before item
        # 4's came; read before item 4's own rest can have been saved (`REST_UNSAVED` after its turn ended).
        so_far = saved(0)
        if time.monotonic() - sent >= conversation_cache.REST_UNSAVED:
            pytest.skip(
                f"the machine too busy to read the metrics within {conversation_cache.REST_UNSAVED} s"
            )
        after_four = saved(so_far + 1)  # the rest is saved, and the turn stays in its slot
        assert turn("And item 5?") == "resumed"
        after_five = saved(after_four + 1)
        # Another conversation behind the same system prompt goes on in the rest's slot from what the two
        # share; one that shares only the template's few tokens of a role with the next rest begins in an
        # emptied slot, as it would alone. Neither saves a rest again.
        fresh, shared = began("fresh"), began("shared")
        beside = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Which shelf is empty?"}]
        model.chat.completions.create(model="m", messages=beside, max_tokens=8, temperature=0)  # type: ignore[arg-type]
        assert (began("fresh"), began("shared")) == (fresh, shared + 1)
        after_beside = saved(after_five + 1)  # its own turn, resting
        other = [{"role": "user", "content": "Count the crates on the dock."}]
        model.chat.completions.create(model="m", messages=other, max_tokens=8, temperature=0)  # type: ignore[arg-type]
        assert (began("fresh"), began("shared")) == (fresh + 1, shared + 1)
        saved(after_beside + 1)  # its own turn, resting
        time.sleep(conversation_cache.REST_UNSAVED)
        assert saved(0) == after_beside + 1  # the rests put away were saved already, and not again
        assert turn("And item 6?") == "restored"
    for (earlier, _), (prompt, cached) in itertools.pairwise(seen):
        assert earlier <= cached < prompt


PREAMBLE = "The terms of the operator: every answer is short, polite and checked twice. "
# SmolLM2's ChatML, after a preamble of ~500 tokens.
PREAMBLED = (
    "{{ '"
    + PREAMBLE
    + "' * 30 }}{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def test_a_new_conversation_reuses_the_preamble_its_template_writes_before_every_conversation(
    tmp_path: Path,
    shallow: Path,
) -> None:
    """What a template writes before the messages (Command R's safety preamble, GigaChat's roles, the
    tools' description where there is no system message) is shared by every conversation: a new one goes
    on in the slot the last one rests in, and processes only its own messages. Before, the slot was
    emptied and the preamble processed again for each (GigaChat 3.1's 1,100 tokens: 3.5 s on two cores)."""
    one_slot = configured(shallow, 1024).replace("n_parallel = 2", "n_parallel = 1")
    with configured_server(tmp_path, one_slot + f"chat_template = {json.dumps(PREAMBLED)}\n") as live:
        model = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)
        seen = []
        for question in ("Name a colour.", "Count the crates on the dock.", "Which shelf is empty?"):
            usage = model.chat.completions.create(
                model="m", messages=[{"role": "user", "content": question}], max_tokens=4, temperature=0
            ).usage
            assert usage is not None
            assert usage.prompt_tokens_details is not None
            seen.append((usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0))
        shared = counted(live.url, "modelport_conversation_turns_total", start="shared")
    assert seen[0][1] == 0
    preamble = seen[0][0] - 16  # the preamble's tokens, at least: no question is as long as 16
    assert all(preamble <= cached < prompt for prompt, cached in seen[1:])
    assert shared == 2


QWEN3 = Path(__file__).parents[1] / "service" / "templates" / "qwen3.jinja"
SHELVES: Any = [
    {
        "type": "function",
        "function": {
            "name": f"shelf_{i}",
            "description": f"Where an item of aisle {i} is kept, and how many of it are left.",
            "parameters": {
                "type": "object",
                "properties": {"item": {"type": "string"}},
                "required": ["item"],
            },
        },
    }
    for i in range(8)
]


@pytest.mark.parametrize("before", ["the tools' description", "the template's own text"])
def test_a_new_conversation_beside_others_reuses_what_its_template_writes_before_the_messages(
    tmp_path: Path, shallow: Path, before: str
) -> None:
    """Qwen3's template describes the tools before the messages where no system message comes; another
    writes a long text of its own there (GigaChat's roles, Command R's safety preamble). A new conversation
    sent while another request runs (nothing rests) goes on from a turn that holds it, though that turn was
    a lone question: in the slot that turn was left in, with nothing restored. Before, only prefixes of the
    messages were named, a lone question beside others was not kept, and that text was processed again for
    each new conversation."""
    tools = before == "the tools' description"
    template = QWEN3.read_text() if tools else PREAMBLED
    config = configured(shallow, 1024) + f"chat_template = {json.dumps(template)}\n"
    with configured_server(tmp_path, config) as live:
        model = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)

        def asked(question: str) -> tuple[int, int]:
            conversation: Any = [{"role": "user", "content": question}]
            offered: Any = {"tools": SHELVES, "reasoning_effort": "none"} if tools else {}
            usage = model.chat.completions.create(
                model="m", messages=conversation, max_tokens=4, **offered
            ).usage
            assert usage is not None
            assert usage.prompt_tokens_details is not None
            return usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens or 0

        with answering_beside(model):
            # A lone question beside others is kept only from its second sending; this one at once.
            first = asked("Where is the flour?")
            started = counted_by(live.url, "modelport_conversation_turns_total", "start")
            prompt, cached = asked("Which aisle holds the salt?")
            after = counted_by(live.url, "modelport_conversation_turns_total", "start")
            assert {start: after[start] - started.get(start, 0) for start in after} == {
                **dict.fromkeys(after, 0),
                "shared": 1,
            }
    assert first[1] == 0
    assert first[0] - 24 <= cached < prompt  # what comes before the messages, whole


def test_a_lone_prompt_is_kept_when_it_ends_alone_and_from_its_second_sending_beside_others(
    tmp_path: Path,
    shallow: Path,
) -> None:
    """A lone request (most are one-off questions) ending while no other runs — one user's session — is
    saved, so its next sending reuses its prompt though other prompts took both slots in between; a sending
    restored from the file that holds it does not save it again. One that ends beside another running is
    not saved the first time (saving every one cost free chat throughput), only from its second sending."""
    with configured_server(tmp_path, configured(shallow, 1024)) as live:
        model = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)
        kept = [
            *Path("/dev/shm").glob(f"modelport-slots-{live.pid}-*"),
            *Path(tempfile.gettempdir()).glob(f"modelport-slots-{live.pid}-*"),
        ]
        assert len(kept) == 1

        def cached(prompt: str) -> int:
            return cached_tokens(model, prompt)

        ask = "List three rivers of Europe and the seas they flow into, with one fact about each."
        reused, saved = [], []
        for i in range(3):
            reused.append(cached(ask))
            cached("Once upon a time there was a lighthouse.")
            cached("def main():\n    return 42\n")
            # Saves come after an answer's end; a request that finds none running waits for them.
            cached(f"A question asked once: {i}?")
            saved.append({file.name: file.stat().st_mtime_ns for file in kept[0].glob("*.bin")})
        beside = "Name two mountains of Asia and the countries they stand in."
        with answering_beside(model):
            first = cached(beside)
            erased = counted(live.url, "modelport_conversation_erases_total")
        # Its slot, left full beside the long answer, is emptied as the long answer's turn ends: sent again
        # before that, it would go on there from its own tokens.
        emptied_past(live.url, erased)
        again = [cached(beside), cached(beside)]
    assert reused[0] == 0
    assert reused[1] > 10
    assert reused[2] == reused[1]
    # Each prompt saved at its first sending, sent alone (the round's last one's save may still be under way
    # when the files are listed); the three sent again restored, and not written again.
    assert len(saved[0]) >= 3
    assert len(saved[2]) >= 5
    assert all(saved[0][name] == saved[2][name] for name in saved[0])
    assert (first, again[0]) == (0, 0)  # not saved beside the long answer; saved at its second sending
    assert again[1] > 10


def test_slots_are_emptied_once_nothing_runs_not_as_each_turn_ends_beside_others(
    tmp_path: Path,
    shallow: Path,
) -> None:
    """An emptying is a call through llama.cpp's loop, which waits for its decoding step and held the slot
    that long: one-off prompts answered beside a long answer leave their slot full for the next, which goes
    on from what the two prompts share, and that slot is emptied once the last turn has ended (the long
    answer, which rests in its own), before a request sent alone then is placed (it decodes beside nobody's
    tokens)."""
    with configured_server(tmp_path, configured(shallow, 1024)) as live:
        model = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)

        def cached(prompt: str) -> int:
            return cached_tokens(model, prompt)

        def erased() -> float:
            return counted(live.url, "modelport_conversation_erases_total")

        cached("Where do the rivers of Europe flow?")
        with answering_beside(model):  # which put away the turn resting from the first: an emptying
            before = erased()
            beside = [cached(f"A question asked once, number {i}: why?") for i in range(5)]
            during = erased() - before
        # The long answer's turn ends as the server notices its client gone: the last, it empties the other.
        emptied_past(live.url, before)
    assert during == 0  # before: one a turn
    # Each one-off prompt went on from what it shares with the one before it ("A question asked once, …").
    assert beside[0] == 0
    assert all(cached > 0 for cached in beside[1:])


def test_a_turn_beside_others_goes_on_in_the_slot_its_last_turn_was_left_in_with_nothing_restored(
    tmp_path: Path,
    shallow: Path,
) -> None:
    """Beside a long answer, a conversation's turn leaves its slot holding its tokens; the next turn (and
    the same prompt sent again) goes on there from them, where it was restored from its file, a call
    through llama.cpp's loop that waits for its decoding step (45 ms at 32 clients)."""
    with configured_server(tmp_path, configured(shallow, 1024)) as live:
        model = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)
        history: list[dict[str, str]] = [{"role": "system", "content": SYSTEM}]
        prompts, reused = [], []
        with answering_beside(model):
            started = counted_by(live.url, "modelport_conversation_turns_total", "start")
            for turn in range(3):
                usage = next_turn(model, history, f"Question {turn}: where is item {turn}?")
                assert usage.prompt_tokens_details is not None
                prompts.append(usage.prompt_tokens)
                reused.append(usage.prompt_tokens_details.cached_tokens or 0)
            again = [cached_tokens(model, "Name the seas of Europe.") for _ in range(3)]
            after = counted_by(live.url, "modelport_conversation_turns_total", "start")
    began = {start: after.get(start, 0) - started.get(start, 0) for start in after}
    assert all(now >= earlier for earlier, now in zip(prompts, reused[1:], strict=False))  # its whole history
    assert again[2] >= again[1] > 0
    assert began.get("restored", 0) == 0
    assert began["resumed"] == 4  # the conversation's second and third turns, the prompt's second and third


def test_a_new_conversation_beside_others_takes_the_slot_left_last_and_spares_the_one_left_first(
    tmp_path: Path,
    shallow: Path,
) -> None:
    """Conversations that take turns come back in the order they left: a new one (or one whose slot was
    taken) goes on from the slot left full last, so that the conversation that left first, whose turn comes
    first, still finds its own."""
    three_slots = configured(shallow, 1024).replace("n_parallel = 2", "n_parallel = 3")
    with configured_server(tmp_path, three_slots) as live:
        model = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0, timeout=120)
        histories: dict[str, list[dict[str, str]]] = {}

        def turn(name: str) -> None:
            history = histories.setdefault(name, [{"role": "system", "content": SYSTEM}])
            next_turn(model, history, f"Conversation {name}: where is item {len(history)}?", tokens=4)

        with answering_beside(model):
            for name in ("first", "second"):
                turn(name)
            started = counted_by(live.url, "modelport_conversation_turns_total", "start")
            turn("new")
            turn("first")
            after = counted_by(live.url, "modelport_conversation_turns_total", "start")
    began = {start: after[start] - started.get(start, 0) for start in after}
    assert began == {**dict.fromkeys(after, 0), "shared": 1, "resumed": 1}
