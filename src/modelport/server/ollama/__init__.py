"""Ollama's API (`/api/*`) as a face over the operation table: `/api/chat` and `/api/generate` are requests of
the chat (or, `raw`, the completion) row, `/api/embed` and `/api/embeddings` of the embeddings row, the
model listings read the service's models; answers are rendered in Ollama's shapes (NDJSON streams by
default). Keys, projects, limits and usage are the rows', as for every face. Models are managed by
`modelport pull` and `models.toml`, so pulling, creating and deleting answer with Ollama's error saying so."""
