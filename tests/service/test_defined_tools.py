"""The tools OpenAI defines by type that the client runs — `shell`, `apply_patch`, `local_shell` — on both
faces: each call comes as the item of its own type (whole and streamed), and given back with its output, the
model reads the call and what it gave. `caller` calls the first tool it is offered with the arguments its
schema requires (the last user message in each), and answers with a tool's output once it has one."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces

KEY = "sk-defined"
ASK = "ls -l"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    database = str(tmp_path_factory.mktemp("defined") / "state.db")
    with faces(tiny_models(database, KEY, caller="schema_tool_chat"), api_key=KEY) as both:
        yield both


@pytest.fixture(params=["http", "in-process"])
def face(request: pytest.FixtureRequest, served: Faces) -> openai.OpenAI:
    return served.face(request.param)


def given_back(item: Any) -> dict[str, Any]:
    return dict(item.model_dump(exclude_none=True, warnings=False))


# (the tool, the call's type, what of the call the test reads, an output for it, what the model reads of it)
CASES = [
    (
        {"type": "shell", "environment": {"type": "local"}},
        "shell_call",
        lambda call: call.action.commands,
        lambda call: {
            "type": "shell_call_output",
            "call_id": call.call_id,
            "output": [{"stdout": "a.txt\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}],
        },
        "exit code 0\na.txt\n",
    ),
    (
        {"type": "apply_patch"},
        "apply_patch_call",
        lambda call: [call.operation.type, call.operation.path],
        lambda call: {
            "type": "apply_patch_call_output",
            "call_id": call.call_id,
            "status": "failed",
            "output": "no such file",
        },
        "failed\nno such file",
    ),
    (
        {"type": "local_shell"},
        "local_shell_call",
        lambda call: call.action.command,
        lambda call: {"type": "local_shell_call_output", "id": call.call_id, "output": "a.txt"},
        "a.txt",
    ),
]
CALLED = {"shell_call": [ASK], "apply_patch_call": ["create_file", ASK], "local_shell_call": [ASK]}


@pytest.mark.parametrize(("tool", "kind", "read", "output", "said"), CASES, ids=[c[1] for c in CASES])
def test_a_call_comes_as_its_own_item_and_its_output_reaches_the_model(
    face: openai.OpenAI, tool: dict[str, Any], kind: str, read: Any, output: Any, said: str
) -> None:
    first = face.responses.create(model="caller", input=ASK, tools=[tool])  # type: ignore[list-item]
    [call] = first.output
    assert call.type == kind
    assert call.status == "completed"
    assert read(call) == CALLED[kind]
    then = [{"role": "user", "content": ASK}, given_back(call), output(call)]
    answer = face.responses.create(model="caller", input=then, tools=[tool])  # type: ignore[arg-type,list-item]
    assert answer.output_text == said
    # And through the stored chain, as the next turn of the first.
    chained = face.responses.create(
        model="caller",
        previous_response_id=first.id,
        input=[output(call)],
        tools=[tool],  # type: ignore[list-item]
    )
    assert chained.output_text == said


@pytest.mark.parametrize(("tool", "kind", "read", "output", "said"), CASES, ids=[c[1] for c in CASES])
def test_a_streamed_call_is_added_and_done_whole(
    face: openai.OpenAI, tool: dict[str, Any], kind: str, read: Any, output: Any, said: str
) -> None:
    with face.responses.stream(model="caller", input=ASK, tools=[tool]) as stream:  # type: ignore[list-item]
        events = list(stream)
        final = stream.get_final_response()
    items = [(e.type, e.item.type) for e in events if e.type.startswith("response.output_item")]
    assert items == [("response.output_item.added", kind), ("response.output_item.done", kind)]
    done = next(e.item for e in events if e.type == "response.output_item.done")
    assert read(done) == CALLED[kind]
    assert [item.type for item in final.output] == [kind]


def test_tool_choice_forces_them_and_a_shell_in_a_container_is_not_offered(face: openai.OpenAI) -> None:
    forced = face.responses.create(
        model="caller", input=ASK, tools=[{"type": "apply_patch"}], tool_choice={"type": "apply_patch"}
    )
    assert forced.output[0].type == "apply_patch_call"
    with pytest.raises(openai.BadRequestError) as refused:
        face.responses.create(
            model="caller", input=ASK, tools=[{"type": "apply_patch"}], tool_choice={"type": "shell"}
        )
    assert refused.value.body["param"] == "tool_choice"
    hosted = face.responses.create(
        model="caller", input=ASK, tools=[{"type": "shell", "environment": {"type": "container_auto"}}]
    )
    assert hosted.output[0].type == "message"  # OpenAI's container runs that one: the model is not offered it


def test_the_agents_sdk_runs_its_shell_and_patch_tools_on_the_calls(served: Faces) -> None:
    """The OpenAI Agents SDK's `ShellTool` and `ApplyPatchTool`, their executor and editor run by the SDK on
    the calls the model made here, and the next turn answering with what they gave."""
    from agents import (
        Agent,
        ApplyPatchTool,
        OpenAIResponsesModel,
        Runner,
        ShellTool,
        set_tracing_disabled,
    )
    from agents.editor import ApplyPatchOperation, ApplyPatchResult

    set_tracing_disabled(True)  # traces would go to OpenAI's servers
    ran: list[list[str]] = []

    def execute(request: Any) -> str:
        ran.append(list(request.data.action.commands))
        return "a.txt"

    class Editor:
        def __init__(self) -> None:
            self.made: list[tuple[str, str]] = []

        def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            self.made.append((operation.type, operation.path))
            return ApplyPatchResult(output="created")

        def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            return ApplyPatchResult(output="updated")

        def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
            return ApplyPatchResult(output="deleted")

    async def run() -> None:
        client = openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key=KEY, max_retries=0)
        model = OpenAIResponsesModel(model="caller", openai_client=client)
        shell = Agent(
            name="sh", model=model, tools=[ShellTool(executor=execute, environment={"type": "local"})]
        )
        said = await Runner.run(shell, ASK, max_turns=2)
        assert ran == [[ASK]]
        assert "a.txt" in said.final_output
        editor = Editor()
        patcher = Agent(name="patch", model=model, tools=[ApplyPatchTool(editor=editor)])
        patched = await Runner.run(patcher, "notes.txt", max_turns=2)
        assert editor.made == [("create_file", "notes.txt")]
        assert "created" in patched.final_output
        await client.close()

    asyncio.run(run())
