"""Hybrid search of one vector store: the chunks nearest the query's embedding and the chunks that best
match its words by the database's full-text rank, merged by reciprocal rank fusion (each list adds
1 / (60 + rank) to a chunk). Each result's `score` is its cosine similarity to the query (so a
`score_threshold` means the same whichever list found it); results are in fused order."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from modelport.store.chunk_rows import ChunkRows, Hit

_FUSION = 60  # the constant of reciprocal rank fusion, as in its paper and most search engines
_WORD = re.compile(r"\w+", re.UNICODE)
_WORDS = 32  # words of a query used by the full-text search
# Words too common to rank by: each matches most chunks, so ranking by them costs a scan of nearly every
# chunk and tells nothing (PostgreSQL's english configuration drops the same ones).
_STOP_WORDS = (
    "a about above after again against all am an and any are as at be because been before being "
    "below between both but by can could did do does doing down during each few for from "
    "further had has have having he her here hers herself him himself his how i if in into is "
    "it its itself just me more most my myself no nor not now of off on once only or other our "
    "ours ourselves out over own same she should so some such than that the their theirs them "
    "themselves then there these they this those through to too under until up very was we were "
    "what when where which while who whom why will with would you your yours yourself "
    "yourselves"
)
_STOP = frozenset(_STOP_WORDS.split())


@dataclass(frozen=True)
class Found:
    """One result: the chunk, its fused rank score, and the file's name and attributes."""

    hit: Hit
    fused: float


async def hybrid(
    rows: ChunkRows,
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
        words = [w for w in dict.fromkeys(w.lower() for w in _WORD.findall(query)) if w not in _STOP][:_WORDS]
        for rank, chunk_id in enumerate(await rows.matching(store_id, words, file_ids, depth)):
            fused[chunk_id] = fused.get(chunk_id, 0.0) + lexical / (_FUSION + rank + 1)
    best = sorted(fused, key=lambda i: -fused[i])
    hits = await rows.chunks(store_id, best, np.mean([vector for _, vector in queries], axis=0))
    found = [Found(hits[i], fused[i]) for i in best if i in hits and hits[i].similarity >= threshold]
    return found[:limit]
