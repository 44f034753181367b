"""The answers of a face whose types come from a package of their own (Anthropic's, Ollama's) in the OpenAPI
document: added as the document is first made, so that the package is imported with the face's first use
or the document's, never with the server (the `anthropic` package is 2 s of a 2-core machine's start,
`ollama` a quarter of a second)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema


def documented(app: FastAPI, answers: Callable[[], Mapping[str, type[BaseModel]]], named: str) -> None:
    """Complete `app`'s OpenAPI document, when it is first made, with each route's answer: `answers` gives
    the model of the 200 answer by the route's path (one method a path); their schemas are named
    `{named}{Model}` beside OpenAI's."""
    made = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        document = made()
        given = answers()
        refs, schemas = models_json_schema(
            [(model, "serialization") for model in given.values()],
            ref_template=f"#/components/schemas/{named}{{model}}",
        )
        kept = document.setdefault("components", {}).setdefault("schemas", {})
        kept.update({f"{named}{name}": schema for name, schema in schemas.get("$defs", {}).items()})
        for path, model in given.items():
            for operation in document["paths"][path].values():
                answer = {"application/json": {"schema": refs[(model, "serialization")]}}
                operation["responses"]["200"]["content"] = answer
        return document

    app.openapi = openapi  # type: ignore[method-assign]  # FastAPI's way to complete its document
