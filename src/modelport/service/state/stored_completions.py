"""Stored chat completions: what `store: true` keeps (committed before the client has the whole answer:
before the body, or before `[DONE]`), and reading it back — listed, retrieved, its metadata updated,
deleted."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any, cast

import anyio
from openai.types.chat import ChatCompletion, ChatCompletionDeleted, ChatCompletionStoreMessage

from modelport import context
from modelport.errors import NotFoundError, StoreDisabledError
from modelport.protocol.answers import Events, ListPage
from modelport.protocol.chunk_folds import ChatFold
from modelport.protocol.requests import ChatCompletionRequest
from modelport.protocol.sdk_private import loosely
from modelport.service.state.listing import bounded_limit, checked_order
from modelport.settings import StoreSettings
from modelport.store import Store


class StoredCompletions:
    """Chat completions kept on request (or always), and the routes that read them back."""

    def __init__(self, store: Store | None, settings: StoreSettings) -> None:
        self.store = store
        self.settings = settings

    def wanted(self, request: ChatCompletionRequest) -> bool:
        """Whether this request's answer is to be stored (a 400 if it asks and storing is off)."""
        if request.store is True and self.store is None:
            raise StoreDisabledError(
                "store is true, but this server stores nothing (started with --database none).", param="store"
            )
        if request.store is not None:
            return request.store
        return self.settings.chat_completions == "always" and self.store is not None

    async def ready(self) -> None:
        """Answer 503 now, before anything is generated, if the store is known to be unreachable and still
        is."""
        if self.store is not None and self.store.state()["state"] == "down":
            await self.store.ping()

    async def keep(
        self, request: ChatCompletionRequest, answer: ChatCompletion | Events[ChatCompletion]
    ) -> ChatCompletion | Events[ChatCompletion]:
        """Store a whole answer now; a streamed one as its last chunk passes, before `[DONE]`. Either is
        the project's of the request in hand (a stream may be read in another task)."""
        project = context.current().project
        if isinstance(answer, Events):
            return Events(self._kept(request, answer.items, project), answer.kind)
        await self._save(request, answer.model_dump(mode="json", exclude_unset=True), "completed", project)
        return answer

    async def _kept(
        self,
        request: ChatCompletionRequest,
        chunks: AsyncGenerator[dict[str, Any], None],
        project: str,
    ) -> AsyncGenerator[dict[str, Any], None]:
        fold = ChatFold()
        try:
            async for chunk in chunks:
                fold.add(chunk)
                yield chunk
        except BaseException:
            # The client left (or the stream broke): what was produced is kept, marked incomplete.
            with anyio.CancelScope(shield=True):
                if fold.head:  # at least one chunk went out
                    await self._save(request, fold.whole(), "incomplete", project)
            raise
        finally:
            await chunks.aclose()
        await self._save(request, fold.whole(), "completed", project)  # a failure here is an error event

    async def _save(
        self, request: ChatCompletionRequest, completion: dict[str, Any], status: str, project: str
    ) -> None:
        assert self.store is not None
        sent = request.model_dump(mode="json", exclude_unset=True, exclude={"metadata", "store"})
        await self.store.completions.save(completion, sent, request.metadata or {}, status, project)

    def _store(self) -> Store:
        if self.store is None:
            raise StoreDisabledError("This server stores nothing (started with --database none).")
        return self.store

    async def retrieve(self, completion_id: str) -> ChatCompletion:
        """`GET /v1/chat/completions/{id}`: the answer, its `metadata`, and the request's messages as
        `input_messages`."""
        return _completion_of(await self._row(completion_id))

    async def list(
        self,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
        model: str | None = None,
        metadata: dict[str, str] | None = None,
    ) -> ListPage[ChatCompletion]:
        """`GET /v1/chat/completions`: oldest first unless `order` is `desc`."""
        page = await self._store().completions.list_page(
            project=context.current().project,
            after=after,
            limit=bounded_limit(limit),
            order=checked_order(order, "asc"),
            model=model,
            metadata=metadata or {},
        )
        return ListPage([_completion_of(row) for row in page.rows], page.has_more)

    async def update(self, completion_id: str, metadata: dict[str, str] | None) -> ChatCompletion:
        """`POST /v1/chat/completions/{id}`: replace its metadata."""
        project = context.current().project
        if not await self._store().completions.set_metadata(completion_id, project, metadata or {}):
            raise _missing(completion_id)
        return await self.retrieve(completion_id)

    async def delete(self, completion_id: str) -> ChatCompletionDeleted:
        """`DELETE /v1/chat/completions/{id}`."""
        if not await self._store().completions.delete(completion_id, context.current().project):
            raise _missing(completion_id)
        return ChatCompletionDeleted(object="chat.completion.deleted", id=completion_id, deleted=True)

    async def messages(
        self,
        completion_id: str,
        *,
        after: str | None = None,
        limit: int | None = None,
        order: str | None = None,
    ) -> ListPage[ChatCompletionStoreMessage]:
        """`GET /v1/chat/completions/{id}/messages`: the request's messages, each with an id."""
        row = await self._row(completion_id)
        listed = [
            _store_message(completion_id, i, m) for i, m in enumerate(row["request"].get("messages") or [])
        ]
        if checked_order(order, "asc") == "desc":
            listed.reverse()
        if after is not None:
            ids = [m.id for m in listed]
            if after not in ids:
                raise NotFoundError(
                    f"No message found with id '{after}' (the `after` cursor).", param="after"
                )
            listed = listed[ids.index(after) + 1 :]
        size = bounded_limit(limit)
        return ListPage(listed[:size], len(listed) > size)

    async def _row(self, completion_id: str) -> dict[str, Any]:
        row = await self._store().completions.get(completion_id, context.current().project)
        if row is None:
            raise _missing(completion_id)
        return row


def _completion_of(row: dict[str, Any]) -> ChatCompletion:
    data = {
        **row["completion"],
        "metadata": row["metadata"],
        "input_messages": row["request"].get("messages") or [],
    }
    if row["status"] != "completed":
        data["status"] = row["status"]  # the client left before the end: what was produced
    return ChatCompletion.model_validate(data)


def _store_message(completion_id: str, index: int, message: dict[str, Any]) -> ChatCompletionStoreMessage:
    content = message.get("content")
    parts = None
    if isinstance(content, list):
        parts = content
        content = "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))
    data = {**message, "id": f"{completion_id}-{index}", "content": content, "content_parts": parts}
    # The SDK types a stored message like an assistant's; user and system ones break that, so no validation.
    return cast(ChatCompletionStoreMessage, loosely(ChatCompletionStoreMessage, data))


def _missing(completion_id: str) -> NotFoundError:
    return NotFoundError(f"No chat completion found with id '{completion_id}'.", param="completion_id")
