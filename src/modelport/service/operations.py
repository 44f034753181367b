"""What an operation is: one row of the operation table (`operation_table.OPERATIONS`), the one place an
endpoint of OpenAI's API exists. Every face derives from the rows: the HTTP routes and their body bounds
(`server.operation_routes`), the in-process client's dispatch (`client.dispatch`), the batch runner's lines
and the Ray replica's calls. A row's `call` takes the service and the request's inputs, by name: the path's
parameters, `body` (a request model, validated by the face), scalar query parameters, `query` (the query
string's items, for filters such as `metadata[key]=value`) and `upload` (a multipart request's file).
"""

from __future__ import annotations

import inspect
import io
import re
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, TypeAdapter, ValidationError

from modelport.errors import InvalidRequestError, PayloadTooLargeError, RouteError
from modelport.predictors.contract import Capability
from modelport.protocol.answers import EventKind
from modelport.protocol.validation import invalid, parse

if TYPE_CHECKING:
    from modelport.service import Service
    from modelport.settings import Settings

QueryItems = list[tuple[str, str]]  # a query string's items, in order, repeated keys repeated
Method = Literal["GET", "POST", "DELETE"]
# Which bound a request's body is held to: `body`, the JSON body bound ([limits] body_bytes); `files`, an
# upload to the Files API; `part`, a part of an upload (the Uploads API); `audio`, an audio upload.
Bound = Literal["body", "files", "part", "audio"]
PART_BYTES = 64 * 1024 * 1024  # the most one part of an upload holds, as OpenAI's
# The names a call's parameters may have beside the path's, and what each receives: the request body, the
# query string's items, a multipart file, and whether the face reads the answer whole (in-process and batch
# lines; over HTTP an answer streams as it is made).
BODY, QUERY, UPLOAD, WHOLE = "body", "query", "upload", "whole"
# The Usage API's kinds (`/organization/usage/{kind}`): what a model's answer to an operation is counted as.
UsageKind = Literal["completions", "embeddings", "audio_speeches", "audio_transcriptions"]


@dataclass(frozen=True)
class Relayed:
    """How a relay (an upstream server, a Ray replica) serves an operation, and what its answer must be to
    be passed on: JSON of a type (which may hang on the request, as a transcript's on its format) holding a
    main field, events of a kind, or bytes; whether the events are chunks with choices (folded into the
    whole answer when it was not streamed, a whole answer streamed as chunks when it was); and whether the
    answer names its model (ours replaces the upstream's)."""

    whole: Callable[[Any], type[BaseModel]] | None  # None: a JSON answer is the upstream's fault
    key: str = ""  # the field a JSON answer must hold
    events: EventKind[Any] | None = None  # None: a stream is the upstream's fault
    binary: bool = False
    chunks: bool = False
    named_model: bool = True


@dataclass(frozen=True)
class FilePart:
    """A multipart request's file: its name, and its bytes to read (an upload spooled to disk over HTTP)."""

    name: str
    source: typing.IO[bytes]

    @classmethod
    def of(cls, name: str, content: bytes) -> FilePart:
        """A file part from bytes in hand."""
        return cls(name, io.BytesIO(content))


@dataclass(frozen=True)
class Operation:
    """One endpoint: how it is reached, what it takes (its call's signature says), what it needs."""

    name: str  # as the SDK names it: `chat.completions.create`
    method: Method
    path: str  # below `/v1`, with `{name}` for path parameters (`{name:path}` where it may hold `/`)
    call: Callable[..., Awaitable[object]]
    capability: Capability | None = None  # the model capability it asks for
    relayed: Relayed | None = None  # a relay serves it (one row per capability): what it forwards
    usage: UsageKind | None = None  # what a model's answer to it counts as
    batchable: bool = False  # a Batch API line may name it
    stored: bool = False  # it reaches objects stored for a project
    admin: bool = False  # the organization API: admin keys only
    session: bool = False  # a realtime client secret may call it (the WebRTC calls of its session)
    local_files: str | None = None  # the body field whose content parts may name `file://` paths (in-process)
    bound: Bound = "body"
    upload_field: str = "file"  # the multipart field its `upload` comes in
    pattern: re.Pattern[str] = field(init=False, repr=False, compare=False)
    inputs: dict[str, inspect.Parameter] = field(init=False, repr=False, compare=False)
    hints: dict[str, Any] = field(init=False, repr=False, compare=False)
    adapters: dict[str, TypeAdapter[Any]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        regex = re.sub(
            r"\{(\w+)(:path)?\}",
            lambda m: f"(?P<{m[1]}>{'.+' if m[2] else '[^/]+'})",
            self.path,
        )
        object.__setattr__(self, "pattern", re.compile(f"{regex}/?"))
        hints = typing.get_type_hints(self.call, localns={"Service": object})
        parameters = list(inspect.signature(self.call).parameters.values())[1:]  # the service first
        object.__setattr__(self, "inputs", {p.name: p for p in parameters})
        object.__setattr__(self, "hints", hints)
        adapters = {name: TypeAdapter(hints.get(name, Any)) for name in self.query_names()}
        object.__setattr__(self, "adapters", adapters)

    @property
    def route(self) -> str:
        """The path as a route names it (`{model_id}` for `{model_id:path}`): for metric labels."""
        return "/v1" + re.sub(r"\{(\w+):path\}", r"{\1}", self.path)

    @property
    def body_model(self) -> type[BaseModel] | None:
        """The request model of its body, if it takes one."""
        model = self.hints.get(BODY)
        return model if isinstance(model, type) and issubclass(model, BaseModel) else None

    def path_names(self) -> list[str]:
        """The names of its path parameters."""
        return list(self.pattern.groupindex)

    def query_names(self) -> list[str]:
        """The names of its scalar query parameters."""
        path = set(self.path_names())
        return [name for name in self.inputs if name not in path and name not in (BODY, QUERY, UPLOAD, WHOLE)]

    def body_limit(self, settings: Settings) -> int:
        """The most bytes its request body may hold."""
        if self.bound == "files":
            return settings.files.max_bytes + FORM_ROOM
        if self.bound == "part":
            return min(PART_BYTES, settings.files.max_bytes) + FORM_ROOM
        if self.bound == "audio":
            return settings.max_upload_bytes + FORM_ROOM
        return settings.limits.body_bytes

    def too_large(self, settings: Settings) -> PayloadTooLargeError:
        """The 413 for a body over its bound."""
        if self.bound == "body":
            return PayloadTooLargeError(
                f"The request body is over the limit of {self.body_limit(settings)} bytes."
            )
        limit = self.body_limit(settings) - FORM_ROOM
        return PayloadTooLargeError(
            f"The uploaded file is over the limit of {limit} bytes.", param=self.upload_field
        )

    async def invoke(
        self,
        service: Service,
        path: dict[str, str],
        *,
        body: Any = None,
        query: QueryItems | None = None,
        values: dict[str, Any] | None = None,
        upload: FilePart | None = None,
        whole: bool = False,
    ) -> object:
        """Call it with a request's inputs as a face received them: `body` as JSON data (validated here
        into its request model), `values` as the query's typed values (validated here), `query` as the
        query string's items; `whole` when the face reads the answer whole."""
        inputs: dict[str, Any] = dict(path)
        if BODY in self.inputs:
            model = self.body_model
            inputs[BODY] = body if model is None or isinstance(body, model) else parse(model, body or {})
        for name in self.query_names():
            if values and name in values and values[name] is not None:
                inputs[name] = _validated(self.adapters[name], values[name], name)
            elif self.inputs[name].default is inspect.Parameter.empty:  # as FastAPI says it over HTTP
                message = f"Missing required parameter: '{name}'."
                raise InvalidRequestError(message, param=name, code="missing")
        if QUERY in self.inputs:
            inputs[QUERY] = query or []
        if UPLOAD in self.inputs:
            if upload is None:
                field = self.upload_field
                raise InvalidRequestError(
                    f"Missing required parameter: '{field}'.", param=field, code="missing"
                )
            inputs[UPLOAD] = upload
        if WHOLE in self.inputs:
            inputs[WHOLE] = whole
        return await self.call(service, **inputs)


# The multipart form's other fields and boundaries, beyond an uploaded file itself.
FORM_ROOM = 1024 * 1024


# OpenAI's integers are 64-bit: a larger one (Python's are not bounded) would reach SQLite as an overflow.
_INT64 = range(-(2**63), 2**63)


def _validated(adapter: TypeAdapter[Any], value: Any, name: str) -> Any:
    try:
        typed = adapter.validate_python(value)
    except ValidationError as error:
        raise invalid({**dict(error.errors()[0]), "loc": (name,)}) from None
    for number in typed if isinstance(typed, list) else [typed]:
        if isinstance(number, int) and number not in _INT64:
            raise InvalidRequestError(f"{name} must be a 64-bit integer.", param=name, code="invalid_value")
    return typed


class OperationTable:
    """The rows, found by method and path."""

    def __init__(self, operations: list[Operation]) -> None:
        self.operations = operations
        names = [op.name for op in operations]
        duplicated = {name for name in names if names.count(name) > 1}
        if duplicated:
            raise ValueError(f"operations named twice: {sorted(duplicated)}")
        relayed = [op.capability for op in operations if op.relayed is not None]
        if None in relayed or len(set(relayed)) < len(relayed):
            raise ValueError("a relayed operation names its capability, and one operation relays each")
        self._relayed = {op.capability: op for op in operations if op.relayed is not None}

    def __iter__(self) -> typing.Iterator[Operation]:
        return iter(self.operations)

    def find(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        """The operation a request names, and its path parameters; `path` below `/v1`."""
        method = method.upper()
        for operation in self.operations:
            if operation.method == method:
                found = operation.pattern.fullmatch(path)
                if found:
                    return operation, found.groupdict()
        return None

    def get(self, method: str, path: str) -> tuple[Operation, dict[str, str]]:
        """As `find`; a 404 naming the route when nothing serves it, a 405 naming the methods its endpoint
        takes when it is asked by another."""
        found = self.find(method, path)
        if found is None:
            taken = self.methods(path)
            if taken:
                raise RouteError.wrong_method(method, f"/v1{path}", ", ".join(taken))
            raise RouteError.unknown(method, f"/v1{path}")
        return found

    def methods(self, path: str) -> list[str]:
        """The methods the rows at `path` (below `/v1`) take."""
        return sorted({op.method for op in self.operations if op.pattern.fullmatch(path)})

    def by_name(self, name: str) -> Operation:
        """The row named `name`."""
        return next(op for op in self.operations if op.name == name)

    def relayed(self, capability: Capability) -> Operation:
        """The operation a relay of `capability` serves (its row says so)."""
        return self._relayed[capability]

    def batch_endpoint(self, url: str) -> Operation | None:
        """The batchable operation a Batch API `url` (`/v1/chat/completions`) names."""
        found = self.find("POST", url.removeprefix("/v1")) if url.startswith("/v1/") else None
        return found[0] if found is not None and found[0].batchable else None
