"""LlamaIndex as its users write it, against a modelport server: run by tests/server/test_llama_index.py with
the Python of a virtual environment of its own (LlamaIndex pins openai 2), as
`python llama_index_app.py BASE_URL API_KEY CASE...`, a case being `NAME:API` (API `chat` for `OpenAILike`,
`responses` for `OpenAIResponses`). It prints one JSON line: each case's outcome, `{"ok": ...}` or
`{"error": traceback}`."""

from __future__ import annotations

import asyncio
import json
import sys
import traceback
from collections.abc import Callable
from typing import Any

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.agent.workflow import AgentStream, FunctionAgent
from llama_index.core.llms import LLM, ChatMessage
from llama_index.core.prompts import PromptTemplate
from llama_index.core.tools import FunctionTool
from llama_index.embeddings.openai_like import OpenAILikeEmbedding
from llama_index.llms.openai import OpenAIResponses
from llama_index.llms.openai_like import OpenAILike
from pydantic import BaseModel, Field

BASE, KEY = sys.argv[1], sys.argv[2]


def llm(api: str, model: str) -> LLM:
    """The model as LlamaIndex's documentation has an OpenAI-compatible server's set up."""
    if api == "responses":
        return OpenAIResponses(model=model, api_base=BASE, api_key=KEY, context_window=8192, max_retries=0)
    return OpenAILike(
        model=model, api_base=BASE, api_key=KEY, is_chat_model=True, is_function_calling_model=True,
        context_window=8192, max_retries=0,
    )  # fmt: skip


async def text(api: str) -> dict[str, Any]:
    model = llm(api, "reverse")
    said = [ChatMessage(role="user", content="one two three")]
    return {
        "whole": model.chat(said).message.content,
        "streamed": "".join(chunk.delta or "" for chunk in model.stream_chat(said)),
        "awaited": (await model.achat(said)).message.content,
        "astreamed": "".join([chunk.delta or "" async for chunk in await model.astream_chat(said)]),
        "completed": model.complete("one two three").text,
    }


async def agent(api: str) -> dict[str, Any]:
    """An agent of LlamaIndex's workflows with one tool, over a model that calls the first tool it is given
    and then answers with the tool's result."""
    asked: list[str] = []

    def look_up(text: str) -> str:
        """Looks up the answer to a question."""
        asked.append(text)
        return "forty-two"

    running = FunctionAgent(tools=[FunctionTool.from_defaults(look_up)], llm=llm(api, "tools"))
    handler = running.run("What is the answer?", max_iterations=4)
    kinds, streamed = [], []
    async for event in handler.stream_events():
        kinds.append(type(event).__name__)
        if isinstance(event, AgentStream):
            streamed.append(event.delta)
    answer = await handler
    return {"asked": asked, "answer": str(answer), "streamed": "".join(streamed), "kinds": sorted(set(kinds))}


async def rag(api: str) -> dict[str, Any]:
    """A vector index over the server's embeddings, queried with a model that answers with the prompt it
    was given: the passage the embeddings chose must be in it."""
    embed = OpenAILikeEmbedding(model_name="embed", api_base=BASE, api_key=KEY, embed_batch_size=2)
    documents = [
        Document(text="The vault opens door seven."),
        Document(text="Cats purr in the sun."),
        Document(text="Rivers run to the sea."),
    ]
    index = VectorStoreIndex.from_documents(documents, embed_model=embed)
    engine = index.as_query_engine(llm=llm(api, "recall"), similarity_top_k=1)
    found = engine.query("Which door does the vault open?")
    return {"sources": [node.node.get_content() for node in found.source_nodes], "answer": str(found)}


class Pet(BaseModel):
    name: str = Field(max_length=12)
    legs: int = Field(ge=0, le=8)


async def structured(api: str) -> dict[str, Any]:
    """An object of a pydantic model, which LlamaIndex asks for as a call of a tool of its schema."""
    model = llm(api, "smollm2-135m-instruct")
    pet = model.structured_predict(Pet, PromptTemplate("Describe a pet called {name}."), name="Rex")
    return {"type": type(pet).__name__, "pet": pet.model_dump()}


CASES: dict[str, Callable[[str], Any]] = {"text": text, "agent": agent, "rag": rag, "structured": structured}


async def main() -> None:
    outcomes: dict[str, Any] = {}
    for case in sys.argv[3:]:
        name, api = case.split(":")
        try:
            outcomes[case] = {"ok": await CASES[name](api)}
        except Exception:
            outcomes[case] = {"error": traceback.format_exc()}
    print(json.dumps(outcomes))


asyncio.run(main())
