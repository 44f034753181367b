"""What the Responses API stores of a turn: whether it is stored at all, its row as it starts, the row
settled (or saved) as the turn ends and the turn added to its conversation, and the earlier turns a
`previous_response_id` chains back to."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from openai.types.responses import Response

from modelport import context
from modelport.errors import InvalidRequestError, NotFoundError, StoreDisabledError
from modelport.protocol.response_object import ResponseObject
from modelport.protocol.response_request import ResponseRequest
from modelport.service.responses import compaction, items
from modelport.service.responses.conversations import Conversations
from modelport.service.responses.tool_specs import echoed
from modelport.store import Store


@dataclass(frozen=True)
class Ending:
    """What a turn's end writes: its stored row (if stored), its input, and its conversation (if any) with
    the project it belongs to (a job may end in another task); and the responses it continues."""

    row: dict[str, Any] | None
    turn: list[dict[str, Any]]
    conversation: str | None
    project: str
    earlier: list[dict[str, Any]]  # the responses the turn continues, oldest first


class StoredTurns:
    """The stored responses of the caller's project, and the conversations turns are added to."""

    def __init__(self, store: Store | None, conversations: Conversations) -> None:
        self.store = store
        self.conversations = conversations

    def storing(self, request: ResponseRequest) -> bool:
        """Whether the turn is stored; a 400 for what needs a store this server does not keep."""
        if self.store is None:
            for name, given in (
                ("store", request.store),
                ("previous_response_id", request.previous_response_id),
                ("background", request.background or None),
            ):
                if given:
                    raise StoreDisabledError(
                        f"{name} needs stored responses, and this server stores nothing (started with "
                        "--database none).",
                        param=name,
                    )
            return False
        if request.background and request.store is False:
            raise InvalidRequestError(
                "A background response must be stored (store: true).", param="background"
            )
        return request.store is not False

    def required(self) -> Store:
        if self.store is None:
            raise StoreDisabledError("This server stores nothing (started with --database none).")
        return self.store

    async def row(self, response_id: str) -> dict[str, Any]:
        """The stored row of a response of the caller's project; a 404 otherwise."""
        row = await self.required().responses.get(response_id, context.current().project)
        if row is None:
            raise missing(response_id)
        return row

    async def finish(self, ended: Ending, response: ResponseObject) -> None:
        """Store the turn as it ended (a background one was stored when it was queued), and add it to its
        conversation if it made something."""
        row, stored = ended.row, response.to_dict(mode="json")
        if row is not None and row["background"]:
            await self.required().responses.settle(row["id"], stored, heartbeat=int(time.time()))
        elif row is not None:
            await self.required().responses.save({**row, "status": response.status, "response": stored})
        if ended.conversation is not None and response.status in ("completed", "incomplete"):
            made = ended.turn + items.output_items(stored)
            await self.conversations.append(ended.conversation, ended.project, made)

    async def referenced(self, turn: list[dict[str, Any]], param: str) -> list[dict[str, Any]]:
        """A turn's input with each `item_reference` replaced by the item it names: one of the caller's
        project's stored responses' (input or output; the latest holding it); a 404 naming it otherwise."""
        if not any(item.get("type") == "item_reference" for item in turn):
            return turn
        store = self.required()
        project = context.current().project
        out = []
        for i, item in enumerate(turn):
            if item.get("type") == "item_reference":
                row = await store.responses.with_item(item["id"], project)
                found = None if row is None else _item_of(row, item["id"])
                if found is None:
                    raise NotFoundError(f"Item with id '{item['id']}' not found.", param=f"{param}[{i}].id")
                item = found
            out.append(item)
        return out

    async def history(self, previous: str | None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Every earlier turn of the conversation, as chat messages; and those turns' responses."""
        turns, earlier = await self.earlier(previous)
        return [message for turn in turns for message in items.messages(turn)], earlier

    async def earlier(self, previous: str | None) -> tuple[list[list[dict[str, Any]]], list[dict[str, Any]]]:
        """Every earlier turn's items (its input, then its output), oldest first; and their responses."""
        if previous is None:
            return [], []
        chain = await self.required().responses.chain(previous, context.current().project)
        if not chain:
            raise NotFoundError(
                f"Previous response with id '{previous}' not found.", param="previous_response_id"
            )
        if chain[0]["previous_response_id"] is not None:
            raise NotFoundError(
                f"The conversation of '{previous}' goes back to '{chain[0]['previous_response_id']}', "
                "which was deleted.",
                param="previous_response_id",
            )
        turns = [[*row["input_items"], *items.output_items(row["response"])] for row in chain]
        # A turn that compacted its context begins the conversation anew from its compaction item.
        for k in range(len(chain) - 1, -1, -1):
            output = items.output_items(chain[k]["response"])
            if any(item["type"] == "compaction" for item in output):
                turns = [compaction.latest(output), *turns[k + 1 :]]
                break
        return turns, [row["response"] for row in chain]


def new_row(request: ResponseRequest, turn: list[dict[str, Any]], response: Response) -> dict[str, Any]:
    """The stored row of a turn, with its response as it starts."""
    return {
        "id": response.id,
        "created": int(response.created_at),
        "model": response.model,
        "status": response.status,
        "previous_response_id": request.previous_response_id,
        "background": request.background,
        "heartbeat": int(time.time()),
        "metadata": request.metadata or {},
        "request": {
            **request.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"input"}),
            "tools": [tool.to_dict(mode="json") for tool in echoed(request.tools or [])],
        },
        "input_items": turn,
        "response": response.to_dict(mode="json"),
        "project": context.current().project,
    }


def _item_of(row: dict[str, Any], item_id: str) -> dict[str, Any] | None:
    """The item of a stored response (in its input, else its output) with this id."""
    held = [*row["input_items"], *(row["response"].get("output") or [])]
    return next((dict(item) for item in held if isinstance(item, dict) and item.get("id") == item_id), None)


def missing(response_id: str) -> NotFoundError:
    return NotFoundError(f"Response with id '{response_id}' not found.", param="response_id")
