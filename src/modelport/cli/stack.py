"""`modelport llama-stack-config`: a Llama Stack run config whose inference is a running modelport.

Llama Stack's OpenAI-compatible providers discover a server's models but type every one `llm` unless its
name contains "embed", so an embedding model must be registered by hand with its dimension. This asks the
server what each model serves (its `capabilities`), measures each embedding model's dimension with one
request, and writes the config with every chat and embedding model registered as what it is."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import httpx
import yaml

PROVIDER = "modelport"
# Storage paths read the same environment variable as Llama Stack's own distributions.
STORE = "${env.SQLITE_STORE_DIR:=~/.llama/distributions/modelport}"


def write(args: argparse.Namespace) -> int:
    """Write the config for the server at `args.url` to `args.output` (or standard output)."""
    try:
        models = _models(args.url, args.api_key)
    except httpx.HTTPError as error:
        print(f"modelport: error: cannot reach {args.url}: {error}", file=sys.stderr)
        return 1
    except RuntimeError as error:
        print(f"modelport: error: {error}", file=sys.stderr)
        return 1
    if not any(m["model_type"] == "llm" for m in models):
        print(f"modelport: error: {args.url} serves no chat model for Llama Stack", file=sys.stderr)
        return 1
    text = yaml.safe_dump(config(args.url, models, args.port), sort_keys=False)
    if args.output in (None, "-"):
        sys.stdout.write(text)
    else:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}: {', '.join(_described(m) for m in models)}", file=sys.stderr)
    return 0


def config(url: str, models: list[dict[str, Any]], port: int) -> dict[str, Any]:
    """The run config (Llama Stack's `version: 2` format): inference by modelport (its vLLM-compatible
    provider), the Responses API, files and vector stores (faiss), all state in SQLite files."""
    embedding = next((m for m in models if m["model_type"] == "embedding"), None)
    apis = ["inference", "responses", "tool_runtime", "files"]
    apis += ["vector_io", "file_processors"] if embedding else []
    providers: dict[str, Any] = {
        "inference": [
            {
                "provider_id": PROVIDER,
                "provider_type": "remote::vllm",
                "config": {
                    "base_url": url,
                    # The key is read from the environment when the stack starts, never written here.
                    "api_token": "${env.MODELPORT_API_KEY:=none}",
                    # Only what is registered below: discovery would type an embedding model `llm`.
                    "allowed_models": [m["provider_model_id"] for m in models],
                },
            }
        ],
        "responses": [
            {
                "provider_id": "builtin",
                "provider_type": "inline::builtin",
                "config": {
                    "persistence": {
                        "agent_state": {"namespace": "agents", "backend": "kv_default"},
                        "responses": {"table_name": "responses", "backend": "sql_default"},
                    }
                },
            }
        ],
        "tool_runtime": [{"provider_id": "file-search", "provider_type": "inline::file-search"}],
        "files": [
            {
                "provider_id": "builtin-files",
                "provider_type": "inline::localfs",
                "config": {
                    "storage_dir": f"{STORE}/files",
                    "metadata_store": {"table_name": "files_metadata", "backend": "sql_default"},
                },
            }
        ],
    }
    if embedding:
        providers["vector_io"] = [
            {
                "provider_id": "faiss",
                "provider_type": "inline::faiss",
                "config": {"persistence": {"namespace": "vector_io::faiss", "backend": "kv_default"}},
            }
        ]
        # A file added to a vector store is read by a file processor (ogx requires one).
        providers["file_processors"] = [{"provider_id": "pypdf", "provider_type": "inline::pypdf"}]
    stack: dict[str, Any] = {
        "version": 2,
        "distro_name": "modelport",
        "apis": apis,
        "providers": providers,
        "storage": {
            "backends": {
                "kv_default": {"type": "kv_sqlite", "db_path": f"{STORE}/kvstore.db"},
                "sql_default": {"type": "sql_sqlite", "db_path": f"{STORE}/sql_store.db"},
            },
            "stores": {
                "metadata": {"namespace": "registry", "backend": "kv_default"},
                "inference": {"table_name": "inference_store", "backend": "sql_default"},
                "conversations": {"table_name": "openai_conversations", "backend": "sql_default"},
                "prompts": {"namespace": "prompts", "backend": "kv_default"},
            },
        },
        "registered_resources": {"models": [{**m, "provider_id": PROVIDER} for m in models]},
        "server": {"port": port},
    }
    if embedding:
        stack["vector_stores"] = {
            "default_provider_id": "faiss",
            "default_embedding_model": {"provider_id": PROVIDER, "model_id": embedding["model_id"]},
        }
    return stack


def _models(url: str, api_key: str | None) -> list[dict[str, Any]]:
    """Each chat and embedding model the server lists, as a Llama Stack model registration."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=url, headers=headers, timeout=300) as client:
        listed = client.get("/models")
        _check(listed, url)
        models = []
        for model in listed.json()["data"]:
            capabilities = set(model.get("capabilities") or ["chat"])
            if "embedding" in capabilities:
                answer = client.post("/embeddings", json={"model": model["id"], "input": "dimension"})
                _check(answer, url)
                dimension = len(answer.json()["data"][0]["embedding"])
                models.append(_entry(model["id"], "embedding", {"embedding_dimension": dimension}))
            elif capabilities & {"chat", "completion"}:
                models.append(_entry(model["id"], "llm", {}))
        return models


def _entry(model_id: str, model_type: str, metadata: dict[str, Any]) -> dict[str, Any]:
    return {
        "model_id": model_id,
        "provider_model_id": model_id,
        "model_type": model_type,
        "metadata": metadata,
    }


def _check(response: httpx.Response, url: str) -> None:
    if response.status_code != 200:
        raise RuntimeError(f"{url} answered {response.status_code}: {response.text}")


def _described(model: dict[str, Any]) -> str:
    dimension = model["metadata"].get("embedding_dimension")
    return f"{model['model_id']} ({model['model_type']}{f', {dimension} dimensions' if dimension else ''})"
