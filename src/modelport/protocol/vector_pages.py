"""The pages of the Vector Stores API that the `openai` package reads as pages of its own types but has no
type for as a whole: search results, and a file's chunks."""

from __future__ import annotations

from typing import Literal

from openai.types import VectorStoreSearchResponse
from openai.types.vector_stores import FileContentResponse
from pydantic import BaseModel


class SearchResultsPage(BaseModel):
    """`POST /v1/vector_stores/{id}/search`: the results, best first, for the queries searched."""

    object: Literal["vector_store.search_results.page"] = "vector_store.search_results.page"
    search_query: list[str]
    data: list[VectorStoreSearchResponse]
    has_more: bool = False
    next_page: str | None = None


class FileContentPage(BaseModel):
    """`GET /v1/vector_stores/{id}/files/{file_id}/content`: a file's chunks, in order."""

    object: Literal["vector_store.file_content.page"] = "vector_store.file_content.page"
    data: list[FileContentResponse]
    has_more: bool = False
    next_page: str | None = None
