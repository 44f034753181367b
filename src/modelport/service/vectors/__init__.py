"""The Vector Stores API (`/v1/vector_stores`, its files, file batches and search), and the search that
`file_search` in the Responses API runs. Every store is its project's; another project's is a 404. Files
are chunked and embedded in the background (`ingest`); searches are hybrid (`search`)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from openai.types import VectorStore, VectorStoreDeleted, VectorStoreSearchResponse
from openai.types.vector_store_search_response import Content
from openai.types.vector_stores import (
    FileContentResponse,
    VectorStoreFile,
    VectorStoreFileBatch,
    VectorStoreFileDeleted,
)

from modelport import context
from modelport.errors import InvalidRequestError, NotFoundError, StoreDisabledError
from modelport.ids import new_id
from modelport.protocol.answers import ListPage
from modelport.protocol.vector_pages import FileContentPage, SearchResultsPage
from modelport.protocol.vector_requests import (
    FileBatchCreate,
    VectorStoreCreate,
    VectorStoreSearch,
    VectorStoreUpdate,
)
from modelport.service.documents import DocumentReader
from modelport.service.state.files import Files
from modelport.service.state.listing import bounded_limit, checked_order
from modelport.service.vectors import chunking, filters
from modelport.service.vectors.ingest import Embedder, Ingest
from modelport.service.vectors.search import Found, hybrid
from modelport.service.vectors.shapes import (
    STATUSES,
    checked_attributes,
    checked_expires_after,
    expiry,
    file_counts,
    file_object,
    missing_file,
    missing_store,
    ranking,
    store_object,
)
from modelport.settings import VectorStoreSettings
from modelport.store import Store
from modelport.store.chunk_rows import ChunkRows
from modelport.store.vector_rows import VectorRows


@dataclass(frozen=True)
class StoreHit:
    """A search result and the store it was found in (what `file_search` tells the model and cites)."""

    store_id: str
    result: VectorStoreSearchResponse


class VectorStores:
    """Create, read, change, delete and search vector stores; attach files to them."""

    def __init__(
        self,
        store: Store | None,
        files: Files,
        embedder: Embedder,
        documents: DocumentReader,
        default_model: str,
        settings: VectorStoreSettings,
    ) -> None:
        self.store = store
        self.files = files
        self.embedder = embedder
        self.default_model = default_model
        self.ingest = Ingest(store, files, embedder, documents, settings.lease) if store is not None else None

    async def start(self) -> None:
        """Take up files left in progress by a replica that stopped."""
        if self.ingest is not None:
            await self.ingest.resume(self._rows().get)

    async def close(self) -> None:
        """Stop ingesting (what is in progress is taken up at the next start)."""
        if self.ingest is not None:
            await self.ingest.close()

    # Stores.

    async def create(self, request: VectorStoreCreate) -> VectorStore:
        """`POST /v1/vector_stores`: a new store, its files (if any) ingested in the background."""
        rows = self._rows()
        model = self.embedder.resolve(request.embedding_model or self.default_model)
        reader = await self.embedder.reader(model)
        if request.embedding_dimension is not None:
            dimension = (await self.embedder.embed(model, ["dimension"])).shape[1]
            if dimension != request.embedding_dimension:
                raise InvalidRequestError(
                    f"embedding_dimension is {request.embedding_dimension}, "
                    f"but {model} embeds in {dimension} dimensions.",
                    param="embedding_dimension",
                    code="invalid_value",
                )
        strategy = chunking.strategy(request.chunking_strategy, reader, "chunking_strategy")
        for i, file_id in enumerate(request.file_ids or []):
            await self.files.retrieve_as(file_id, f"file_ids[{i}]")
        now = int(time.time())
        expires_after = checked_expires_after(request.expires_after)
        row = {
            "id": new_id("vs", "_"),
            "created": now,
            "name": request.name,
            "description": request.description,
            "metadata": request.metadata or {},
            "model": model,
            "expires_after": expires_after,
            "expires_at": expiry(now, expires_after),
            "last_active": now,
            "version": 0,
            "project": context.current().project,
        }
        await rows.create(row)
        await self._attach(row, [(f, {}, strategy) for f in request.file_ids or []])
        return await self.retrieve(str(row["id"]))

    async def list_stores(
        self,
        *,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        order: str | None = None,
    ) -> ListPage[VectorStore]:
        """`GET /v1/vector_stores`: newest first unless `order` is `asc`."""
        rows = self._rows()
        page = await rows.stores_page(
            project=context.current().project,
            after=after,
            before=before,
            limit=bounded_limit(limit),
            order=checked_order(order, "desc"),
        )
        counts = await rows.counts([row["id"] for row in page.rows])
        return ListPage([store_object(row, counts[row["id"]]) for row in page.rows], page.has_more)

    async def retrieve(self, store_id: str) -> VectorStore:
        """`GET /v1/vector_stores/{id}`."""
        row = await self._owned(store_id)
        return store_object(row, (await self._rows().counts([store_id]))[store_id])

    async def update(self, store_id: str, request: VectorStoreUpdate) -> VectorStore:
        """`POST /v1/vector_stores/{id}`: its name, metadata or expiry."""
        row = await self._owned(store_id)
        given = request.model_fields_set
        values: dict[str, Any] = {}
        if "name" in given:
            values["name"] = request.name
        if "metadata" in given:
            values["metadata"] = request.metadata or {}
        if "expires_after" in given:
            expires_after = checked_expires_after(request.expires_after)
            values["expires_after"] = expires_after
            values["expires_at"] = expiry(row["last_active"], expires_after)
        if values:
            await self._rows().change(store_id, row["project"], values)
        return await self.retrieve(store_id)

    async def delete(self, store_id: str) -> VectorStoreDeleted:
        """`DELETE /v1/vector_stores/{id}`: it, its files' chunks and its batches (the files stay)."""
        if not await self._rows().delete(store_id, context.current().project):
            raise missing_store(store_id)
        return VectorStoreDeleted(id=store_id, object="vector_store.deleted", deleted=True)

    # Files.

    async def attach(
        self,
        store_id: str,
        file_id: str,
        attributes: dict[str, Any] | None = None,
        chunking_strategy: dict[str, Any] | None = None,
    ) -> VectorStoreFile:
        """`POST /v1/vector_stores/{id}/files`: put a file in the store; it is ingested in the background."""
        row = await self._owned(store_id)
        strategy = chunking.strategy(
            chunking_strategy, await self.embedder.reader(row["model"]), "chunking_strategy"
        )
        await self.files.retrieve_as(file_id, "file_id")
        await self._attach(row, [(file_id, checked_attributes(attributes, "attributes"), strategy)])
        return await self.file(store_id, file_id)

    async def list_files(
        self,
        store_id: str,
        *,
        batch_id: str | None = None,
        status: str | None = None,
        after: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        order: str | None = None,
    ) -> ListPage[VectorStoreFile]:
        """`GET /v1/vector_stores/{id}/files` (or a batch's files), `filter`ed by status."""
        await self._owned(store_id)
        if (
            batch_id is not None
            and await self._rows().batch(batch_id, store_id, context.current().project) is None
        ):
            raise NotFoundError(f"No file batch found with id '{batch_id}'.", param="batch_id")
        if status is not None and status not in STATUSES:
            raise InvalidRequestError(f"filter must be one of {', '.join(STATUSES)}.", param="filter")
        page = await self._rows().files_page(
            store_id,
            project=context.current().project,
            status=status,
            batch_id=batch_id,
            after=after,
            before=before,
            limit=bounded_limit(limit),
            order=checked_order(order, "desc"),
        )
        return ListPage([file_object(row) for row in page.rows], page.has_more)

    async def file(self, store_id: str, file_id: str) -> VectorStoreFile:
        """`GET /v1/vector_stores/{id}/files/{file_id}`."""
        return file_object(await self._file_row(store_id, file_id))

    async def update_file(
        self, store_id: str, file_id: str, attributes: dict[str, Any] | None
    ) -> VectorStoreFile:
        """`POST /v1/vector_stores/{id}/files/{file_id}`: replace its attributes."""
        await self._file_row(store_id, file_id)
        await self._rows().set_attributes(store_id, file_id, checked_attributes(attributes, "attributes"))
        return await self.file(store_id, file_id)

    async def detach(self, store_id: str, file_id: str) -> VectorStoreFileDeleted:
        """`DELETE /v1/vector_stores/{id}/files/{file_id}`: take it and its chunks out (the file stays)."""
        await self._owned(store_id)
        if not await self._rows().detach(store_id, file_id):
            raise missing_file(store_id, file_id)
        return VectorStoreFileDeleted(id=file_id, object="vector_store.file.deleted", deleted=True)

    async def file_content(self, store_id: str, file_id: str) -> FileContentPage:
        """`GET /v1/vector_stores/{id}/files/{file_id}/content`: its chunks' text, in order."""
        await self._file_row(store_id, file_id)
        texts = await self._chunks().texts(store_id, file_id)
        return FileContentPage(data=[FileContentResponse(type="text", text=chunk) for chunk in texts])

    # File batches.

    async def create_batch(self, store_id: str, request: FileBatchCreate) -> VectorStoreFileBatch:
        """`POST /v1/vector_stores/{id}/file_batches`: several files at once, followed as one batch."""
        row = await self._owned(store_id)
        if (request.file_ids is None) == (request.files is None):
            raise InvalidRequestError("Give either file_ids or files.", param="file_ids")
        reader = await self.embedder.reader(row["model"])
        shared = chunking.strategy(request.chunking_strategy, reader, "chunking_strategy")
        common = checked_attributes(request.attributes, "attributes")
        wanted: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
        if request.file_ids is not None:
            for i, file_id in enumerate(request.file_ids):
                await self.files.retrieve_as(file_id, f"file_ids[{i}]")
                wanted.append((file_id, common, shared))
        for i, given in enumerate(request.files or []):
            where = f"files[{i}]"
            named = given.get("file_id")
            if not isinstance(named, str):
                raise InvalidRequestError(f"{where}.file_id is required.", param=f"{where}.file_id")
            await self.files.retrieve_as(named, f"{where}.file_id")
            own = given.get("chunking_strategy")
            strategy = chunking.strategy(own, reader, f"{where}.chunking_strategy") if own else shared
            attributes = (
                checked_attributes(given.get("attributes"), f"{where}.attributes")
                if "attributes" in given
                else common
            )
            wanted.append((named, attributes, strategy))
        batch = {
            "id": new_id("vsfb", "_"),
            "vector_store_id": store_id,
            "created": int(time.time()),
            "status": "in_progress",
            "project": row["project"],
        }
        await self._attach(row, wanted, batch)
        return await self.batch(store_id, batch["id"])

    async def batch(self, store_id: str, batch_id: str) -> VectorStoreFileBatch:
        """`GET /v1/vector_stores/{id}/file_batches/{batch_id}`."""
        await self._owned(store_id)
        row = await self._rows().batch(batch_id, store_id, context.current().project)
        if row is None:
            raise NotFoundError(f"No file batch found with id '{batch_id}'.", param="batch_id")
        counts = (await self._rows().counts([store_id], batch_id))[store_id]
        status = row["status"]
        if status == "in_progress" and not counts.get("in_progress"):
            status = "completed" if counts.get("completed") or not counts.get("failed") else "failed"
        return VectorStoreFileBatch.model_validate(
            {
                "id": batch_id,
                "object": "vector_store.files_batch",
                "created_at": row["created"],
                "vector_store_id": store_id,
                "status": status,
                "file_counts": file_counts(counts),
            }
        )

    async def cancel_batch(self, store_id: str, batch_id: str) -> VectorStoreFileBatch:
        """`POST …/file_batches/{batch_id}/cancel`: its files not yet ingested are cancelled."""
        await self.batch(store_id, batch_id)
        await self._rows().cancel_batch(batch_id)
        return await self.batch(store_id, batch_id)

    # Search.

    async def search(self, store_id: str, request: VectorStoreSearch) -> SearchResultsPage:
        """`POST /v1/vector_stores/{id}/search`: the page of results."""
        queries = [request.query] if isinstance(request.query, str) else list(request.query)
        if not queries or not all(isinstance(q, str) and q.strip() for q in queries):
            raise InvalidRequestError("query must be a non-empty string or list of strings.", param="query")
        found = await self.find(
            [store_id], queries, request.filters, request.max_num_results, request.ranking_options
        )
        return SearchResultsPage(search_query=queries, data=[hit.result for hit in found])

    async def find(
        self,
        store_ids: list[str],
        queries: list[str],
        given_filters: dict[str, Any] | None,
        limit: int,
        ranking_options: dict[str, Any] | None,
        param: str = "",
    ) -> list[StoreHit]:
        """The best `limit` results over the caller's stores for the queries, as search results (also what
        `file_search` gives the model)."""
        rule = filters.checked_filter(given_filters, f"{param}filters") if given_filters is not None else None
        threshold, weights = ranking(ranking_options, f"{param}ranking_options")
        results: list[tuple[Found, str, dict[str, Any], str]] = []
        for store_id in store_ids:
            row = await self._owned(store_id)
            if row["expires_at"] is not None and row["expires_at"] < time.time():
                raise InvalidRequestError(
                    f"The vector store {store_id} has expired.", param="vector_store_id"
                )
            await self._touch(row)
            attached = {f["id"]: f for f in await self._rows().files(store_id) if f["status"] == "completed"}
            # Only completed files have chunks: without a filter, every chunk of the store may be found.
            allowed = (
                [f for f, a in attached.items() if filters.matches(rule, a["attributes"])] if rule else None
            )
            vectors = await self.embedder.embed(row["model"], queries)
            pairs = [(query, vectors[i]) for i, query in enumerate(queries)]
            names = await self.files.names(list(attached))
            for found in await hybrid(self._chunks(), store_id, pairs, allowed, limit, threshold, weights):
                # A file whose ingestion completed after `attached` was read is left out: the search
                # answers over the files completed when it began.
                file_id = found.hit.file_id
                if file_id in attached:
                    results.append((found, names.get(file_id, ""), attached[file_id]["attributes"], store_id))
        results.sort(key=lambda r: -r[0].fused)
        return [
            StoreHit(
                store_id,
                VectorStoreSearchResponse(
                    file_id=found.hit.file_id,
                    filename=name,
                    score=round(max(found.hit.similarity, 0.0), 6),
                    attributes=attributes,
                    content=[Content(type="text", text=found.hit.text)],
                ),
            )
            for found, name, attributes, store_id in results[:limit]
        ]

    async def _attach(
        self,
        row: dict[str, Any],
        wanted: list[tuple[str, dict[str, Any], dict[str, Any]]],
        batch: dict[str, Any] | None = None,
    ) -> None:
        now = int(time.time())
        fresh = [
            {
                "vector_store_id": row["id"],
                "id": file_id,
                "created": now,
                "status": "in_progress",
                "last_error": None,
                "attributes": attributes,
                "chunking": strategy,
                "usage_bytes": 0,
                "batch_id": batch["id"] if batch else None,
                "heartbeat": None,
                "project": row["project"],
            }
            for file_id, attributes, strategy in wanted
        ]
        assert self.ingest is not None
        for file in await self._rows().attach(fresh, batch):
            self.ingest.start(row["project"], row["id"], file["id"], row["model"], file["chunking"])

    async def _touch(self, row: dict[str, Any]) -> None:
        now = int(time.time())
        values: dict[str, Any] = {"last_active": now}
        if row["expires_after"]:
            values["expires_at"] = expiry(now, row["expires_after"])
        await self._rows().change(row["id"], row["project"], values)

    async def _owned(self, store_id: str) -> dict[str, Any]:
        row = await self._rows().get(store_id, context.current().project)
        if row is None:
            raise missing_store(store_id)
        return row

    async def _file_row(self, store_id: str, file_id: str) -> dict[str, Any]:
        await self._owned(store_id)
        row = await self._rows().file(store_id, file_id)
        if row is None:
            raise missing_file(store_id, file_id)
        return row

    def _rows(self) -> VectorRows:
        return self._stored().vectors

    def _chunks(self) -> ChunkRows:
        return self._stored().chunks

    def _stored(self) -> Store:
        if self.store is None:
            raise StoreDisabledError(
                "Vector stores need the store, and this server stores nothing (--database none)."
            )
        return self.store


__all__ = ["Embedder", "VectorStores"]
