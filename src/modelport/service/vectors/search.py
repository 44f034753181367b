"""Hybrid search of one vector store: the chunks nearest the query's embedding and the chunks that best
match its words by the database's full-text rank, merged by reciprocal rank fusion (each list adds
1 / (60 + rank) to a chunk). Each result's `score` is its cosine similarity to the query (so a
`score_threshold` means the same whichever list found it); results are in fused order."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from modelport.store.vector_rows import Hit, VectorRows

_FUSION = 60  # the constant of reciprocal rank fusion, as in its paper and most search engines
_WORD = re.compile(r"\w+", re.UNICODE)
_WORDS = 32  # words of a query used by the full-text search


@dataclass(frozen=True)
class Found:
    """One result: the chunk, its fused rank score, and the file's name and attributes."""

    hit: Hit
    fused: float


async def hybrid(
    rows: VectorRows,
    store_id: str,
    queries: list[tuple[str, np.ndarray]],
    file_ids: list[str] | None,
    limit: int,
    threshold: float,
    weights: tuple[float, float] = (1.0, 1.0),
) -> list[Found]:
    """The best `limit` chunks for the queries (text and embedding each), of the files `file_ids` (all
    when None), whose similarity is at least `threshold`."""
    fused: dict[int, float] = {}
    depth = max(limit * 3, 20)
    semantic, lexical = weights
    for query, vector in queries:
        for rank, (chunk_id, _) in enumerate(await rows.nearest(store_id, vector, file_ids, depth)):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + semantic / (_FUSION + rank + 1)
        words = list(dict.fromkeys(w.lower() for w in _WORD.findall(query)))[:_WORDS]
        for rank, chunk_id in enumerate(await rows.matching(store_id, words, file_ids, depth)):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + lexical / (_FUSION + rank + 1)
    best = sorted(fused, key=lambda i: -fused[i])
    hits = await rows.chunks(store_id, best, np.mean([vector for _, vector in queries], axis=0))
    found = [Found(hits[i], fused[i]) for i in best if i in hits and hits[i].similarity >= threshold]
    return found[:limit]
