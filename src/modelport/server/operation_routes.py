"""The HTTP routes, one per row of the operation table: each parses what its row's call takes (FastAPI reads
the path, query and body from the call's own signature, so the OpenAPI document describes them), calls it
and renders the answer. Nothing else is written per endpoint."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.datastructures import UploadFile

from modelport.server.anthropic.routes import VERSION_HEADER
from modelport.server.http_render import render
from modelport.server.json_routes import json_router
from modelport.service import Service
from modelport.service.operation_table import OPERATIONS
from modelport.service.operations import BODY, QUERY, UPLOAD, WHOLE, FilePart, Operation

Endpoint = Callable[..., Awaitable[Response]]


def service_of(request: Request) -> Service:
    """The service the app was built with."""
    service: Service = request.app.state.service
    return service


@functools.cache
def router() -> APIRouter:
    """Every operation of the table as a route below `/v1`: made once a process, for every app (an endpoint
    finds its service on the request's app)."""
    routes = json_router("/v1")
    for operation in OPERATIONS:
        multipart = UPLOAD in operation.inputs
        routes.add_api_route(
            operation.path,
            _form_endpoint(operation) if multipart else _endpoint(operation),
            methods=[operation.method],
            name=operation.name,
            summary=operation.call.__doc__,
            description=operation.call.__doc__ or "",
            openapi_extra=_form_schema(operation) if multipart else None,
        )
    return routes


def _endpoint(operation: Operation) -> Endpoint:
    paths, names = operation.path_names(), operation.query_names()
    takes_query = QUERY in operation.inputs

    async def endpoint(request: Request, **given: Any) -> Response:
        service = service_of(request)
        path = {name: given[name] for name in paths}
        values = {name: given[name] for name in names}
        items = list(request.query_params.multi_items()) if takes_query else None
        answer = await operation.invoke(service, path, body=given.get(BODY), values=values, query=items)
        if VERSION_HEADER in request.headers:  # Anthropic's SDKs list models in their own shape
            from modelport.server.anthropic.model_pages import models_shaped

            answer = models_shaped(operation.name, answer)
        return render(answer)

    parameters = [inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Request)]
    for name, parameter in operation.inputs.items():
        if name in (QUERY, WHOLE):
            continue
        parameters.append(parameter.replace(annotation=operation.hints.get(name, str)))
    endpoint.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    endpoint.__doc__ = operation.call.__doc__
    return endpoint


def _form_endpoint(operation: Operation) -> Endpoint:
    """A multipart request: the file part, and the other fields as the body its request model reads (with
    `key[name]` and `key[]` fields nested as the SDKs send them)."""
    paths = operation.path_names()

    async def endpoint(request: Request) -> Response:
        async with request.form() as form:
            fields: list[tuple[str, Any]] = list(form.multi_items())
            files = [
                value
                for key, value in fields
                if key == operation.upload_field and isinstance(value, UploadFile)
            ]
            upload = FilePart(files[0].filename or "upload", files[0].file) if files else None
            body = nested([(key, value) for key, value in fields if not isinstance(value, UploadFile)])
            path = {name: request.path_params[name] for name in paths}
            answer = await operation.invoke(service_of(request), path, body=body, upload=upload)
        return render(answer)

    endpoint.__doc__ = operation.call.__doc__
    return endpoint


def nested(fields: list[tuple[str, Any]]) -> dict[str, Any]:
    """Form fields as the JSON object they stand for: `a[b]=1` is `{"a": {"b": 1}}`, `a[]=1&a[]=2` and a
    repeated `a` are lists."""
    body: dict[str, Any] = {}
    for key, value in fields:
        name, _, rest = key.partition("[")
        if rest == "]":
            body.setdefault(name, []).append(value)
        elif rest.endswith("]"):
            inner = body.setdefault(name, {})
            if isinstance(inner, dict):
                inner[rest[:-1]] = value
        elif name in body:
            held = body[name]
            body[name] = [*held, value] if isinstance(held, list) else [held, value]
        else:
            body[name] = value
    return body


def _form_schema(operation: Operation) -> dict[str, Any]:
    """The OpenAPI request body of a multipart operation: its request model's fields (if it has one) and the
    file."""
    model = operation.body_model
    # Its sub-models inlined: the document's components are made from the routes' own models, which
    # this schema (given as it is, `openapi_extra`) is not among; a reference to one there would dangle.
    schema: dict[str, Any] = model.model_json_schema() if model is not None else {"type": "object"}
    schema = _inlined(schema, schema.pop("$defs", {}))
    field = operation.upload_field
    schema["properties"] = {**schema.get("properties", {}), field: {"type": "string", "format": "binary"}}
    schema["required"] = [*schema.get("required", []), field]
    return {"requestBody": {"required": True, "content": {"multipart/form-data": {"schema": schema}}}}


def _inlined(node: Any, defs: dict[str, Any]) -> Any:
    """A JSON schema with its references to `defs` (`#/$defs/...`) replaced by what they name."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inlined(defs[ref.removeprefix("#/$defs/")], defs)
        return {key: _inlined(value, defs) for key, value in node.items()}
    if isinstance(node, list):
        return [_inlined(value, defs) for value in node]
    return node
