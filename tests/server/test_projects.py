"""Projects and keys through the openai SDK: every stored object is its project's (another project gets a
404 on every route that reaches one, as if it did not exist), keys are checked, revoked and expire, the
organization API is for admin keys, and `--api-key` keys still work as the default project's."""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import Callable, Iterator
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from modelport.cli import main
from modelport.service.operation_table import OPERATIONS
from modelport.settings import DEFAULT_EMBEDDING, AuthSettings, ModelConfig
from tests.support.configs import tiny_settings
from tests.support.faces import Faces, faces
from tests.support.machine_load import slack

pytestmark = pytest.mark.models  # real models: not the unit tier

TTL = 0.5  # key_cache_seconds of these servers


def cli(*args: str) -> str:
    """What `modelport ARGS` prints (run in this process)."""
    printed = io.StringIO()
    with redirect_stdout(printed):
        assert main(list(args)) == 0
    return printed.getvalue()


def new_key(database: str, project: str, *extra: str) -> str:
    """A key of `project`, made with the command line (the key is its last line)."""
    return made_key(database, project, *extra)[1]


def revocable_key(database: str, project: str) -> tuple[str, str]:
    """A new project and a key of it to revoke (its id, the key); another key stays, since a store with no
    live key would need none."""
    cli("projects", "create", project, "--database", database)
    key_id, key = made_key(database, project)
    made_key(database, project)
    return key_id, key


async def closes_on_revocation(connection: Any, key_id: str, database: str, transport: str) -> None:
    """Revoke a key (as the CLI does, from elsewhere) while `connection`, a WebSocket it opened, is open: the
    server says why in an `error` event, then closes it, within a few times `key_cache_seconds` (0.5 s)."""
    import websockets

    revoked = await revoke(key_id, database)
    event = json.loads(await asyncio.wait_for(connection.recv(), 10))
    with pytest.raises(websockets.ConnectionClosed):
        await asyncio.wait_for(connection.recv(), 10)
    assert event["type"] == "error"
    assert event["error"]["code"] == "invalid_api_key"
    closed_within(revoked, transport)


async def revoke(key_id: str, database: str) -> float:
    """Revoke a key as the CLI does, from another process's point of view; when (monotonic) it was done."""
    await asyncio.to_thread(cli, "keys", "revoke", key_id, "--database", database)
    return time.monotonic()


def closed_within(revoked: float, transport: str) -> None:
    """What a transport opened with a key revoked at `revoked` ended within: a few `key_cache_seconds` (0.5
    s); printed (`-s`) for the measurement of revocation to close."""
    seconds = time.monotonic() - revoked
    print(f"{transport} closed {seconds:.2f} s after its key was revoked")
    assert seconds < 3 * slack()


def made_key(database: str, project: str, *extra: str) -> tuple[str, str]:
    """A key of `project`: its id (the first word printed) and the key (the last line)."""
    printed = cli("keys", "create", "--project", project, "--database", database, *extra)
    return printed.split()[0], printed.splitlines()[-1]


@dataclass
class Tenants:
    served: Faces
    database: str
    alpha: openai.OpenAI
    beta: openai.OpenAI
    admin: openai.OpenAI

    def client(self, key: str, retries: int = 0) -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.served.url}/v1", api_key=key, max_retries=retries, timeout=60)


@pytest.fixture(scope="module")
def tenants(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tenants]:
    database = str(tmp_path_factory.mktemp("projects") / "state.db")
    for name in ("alpha", "beta", "ops"):
        cli("projects", "create", name, "--database", database)
    alpha, beta = new_key(database, "alpha"), new_key(database, "beta")
    admin = new_key(database, "ops", "--admin")
    settings = tiny_settings(database)
    settings.models.append(ModelConfig(id=DEFAULT_EMBEDDING, engine="onnx-embedding"))  # vector stores'
    settings.auth = AuthSettings(key_cache_seconds=TTL, usage_flush_seconds=0.2)
    settings.api_keys = ["static-key"]
    with faces(settings) as served:
        tenants = Tenants(served, database, alpha=None, beta=None, admin=None)  # type: ignore[arg-type]
        tenants.alpha, tenants.beta = tenants.client(alpha), tenants.client(beta)
        tenants.admin = tenants.client(admin)
        yield tenants


@dataclass
class Owned:
    completion: str
    response: str
    background: str
    file: str
    batch: str
    conversation: str
    item: str
    vector_store: str
    vector_file: str
    file_batch: str
    upload: str
    message_batch: str


def make(client: openai.OpenAI) -> Owned:
    """One stored object of each kind."""
    completion = client.chat.completions.create(
        model="reverse", messages=[{"role": "user", "content": "My password is hunter2."}], store=True
    )
    response = client.responses.create(model="recall", input="remember this")
    background = client.responses.create(model="recall", input="later", background=True)
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions"}
    line["body"] = {"model": "reverse", "messages": [{"role": "user", "content": "one two"}]}  # type: ignore[assignment]
    file = client.files.create(file=("in.jsonl", json.dumps(line).encode() + b"\n"), purpose="batch")
    batch = client.batches.create(
        input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    conversation = client.conversations.create(items=[{"role": "user", "content": "a secret"}])
    item = client.conversations.items.list(conversation.id).data[0].id
    text = client.files.create(file=("notes.txt", b"The vault code is 4417."), purpose="assistants")
    store = client.vector_stores.create(name="secrets", file_ids=[text.id])
    file_batch = client.vector_stores.file_batches.create(store.id, file_ids=[text.id])
    upload = client.uploads.create(bytes=4, filename="in.txt", mime_type="text/plain", purpose="assistants")
    asked = {"model": "reverse", "max_tokens": 5, "messages": [{"role": "user", "content": "one two"}]}
    message_batch = client.post(
        "/messages/batches", body={"requests": [{"custom_id": "a", "params": asked}]}, cast_to=dict[str, Any]
    )["id"]  # Anthropic's Message Batches, on the same batches
    return Owned(
        completion.id, response.id, background.id, file.id, batch.id, conversation.id, item, store.id,
        text.id, file_batch.id, upload.id, message_batch,
    )  # fmt: skip


Call = Callable[[openai.OpenAI, Owned], Any]

# Every route that reaches a stored object, and a call through the SDK that reaches it by its id.
REACHES: dict[tuple[str, str], Call] = {
    ("get", "/v1/chat/completions"): lambda c, o: c.chat.completions.list(after=o.completion),
    ("get", "/v1/chat/completions/{completion_id}"): lambda c, o: c.chat.completions.retrieve(o.completion),
    ("post", "/v1/chat/completions/{completion_id}"): lambda c, o: c.chat.completions.update(
        o.completion, metadata={"seen": "yes"}
    ),
    ("delete", "/v1/chat/completions/{completion_id}"): lambda c, o: c.chat.completions.delete(o.completion),
    ("get", "/v1/chat/completions/{completion_id}/messages"): lambda c, o: c.chat.completions.messages.list(
        o.completion
    ),
    ("post", "/v1/responses/input_tokens"): lambda c, o: c.responses.input_tokens.count(
        model="recall", input="and then?", previous_response_id=o.response
    ),
    ("post", "/v1/responses/compact"): lambda c, o: c.responses.compact(
        model="recall", previous_response_id=o.response
    ),
    ("post", "/v1/responses"): lambda c, o: c.responses.create(
        model="recall", input="and then?", previous_response_id=o.response
    ),
    ("get", "/v1/responses/{response_id}"): lambda c, o: c.responses.retrieve(o.response),
    ("delete", "/v1/responses/{response_id}"): lambda c, o: c.responses.delete(o.response),
    ("post", "/v1/responses/{response_id}/cancel"): lambda c, o: c.responses.cancel(o.background),
    ("get", "/v1/responses/{response_id}/input_items"): lambda c, o: c.responses.input_items.list(o.response),
    ("get", "/v1/files"): lambda c, o: c.files.list(after=o.file),
    ("get", "/v1/files/{file_id}"): lambda c, o: c.files.retrieve(o.file),
    ("delete", "/v1/files/{file_id}"): lambda c, o: c.files.delete(o.file),
    ("get", "/v1/files/{file_id}/content"): lambda c, o: c.files.content(o.file).read(),
    ("post", "/v1/uploads/{upload_id}/parts"): lambda c, o: c.uploads.parts.create(o.upload, data=b"four"),
    ("post", "/v1/uploads/{upload_id}/complete"): lambda c, o: c.uploads.complete(o.upload, part_ids=["x"]),
    ("post", "/v1/uploads/{upload_id}/cancel"): lambda c, o: c.uploads.cancel(o.upload),
    ("get", "/v1/batches"): lambda c, o: c.batches.list(after=o.batch),
    ("get", "/v1/batches/{batch_id}"): lambda c, o: c.batches.retrieve(o.batch),
    ("post", "/v1/batches/{batch_id}/cancel"): lambda c, o: c.batches.cancel(o.batch),
    ("get", "/v1/messages/batches"): lambda c, o: c.get(
        "/messages/batches", options={"params": {"after_id": o.message_batch}}, cast_to=object
    ),
    ("get", "/v1/messages/batches/{message_batch_id}"): lambda c, o: c.get(
        f"/messages/batches/{o.message_batch}", cast_to=object
    ),
    ("post", "/v1/messages/batches/{message_batch_id}/cancel"): lambda c, o: c.post(
        f"/messages/batches/{o.message_batch}/cancel", cast_to=object
    ),
    ("get", "/v1/messages/batches/{message_batch_id}/results"): lambda c, o: c.get(
        f"/messages/batches/{o.message_batch}/results", cast_to=object
    ),
    ("get", "/v1/conversations/{conversation_id}"): lambda c, o: c.conversations.retrieve(o.conversation),
    ("post", "/v1/conversations/{conversation_id}"): lambda c, o: c.conversations.update(
        o.conversation, metadata={"seen": "yes"}
    ),
    ("delete", "/v1/conversations/{conversation_id}"): lambda c, o: c.conversations.delete(o.conversation),
    ("get", "/v1/conversations/{conversation_id}/items"): lambda c, o: c.conversations.items.list(
        o.conversation
    ),
    ("post", "/v1/conversations/{conversation_id}/items"): lambda c, o: c.conversations.items.create(
        o.conversation, items=[{"role": "user", "content": "more"}]
    ),
    ("get", "/v1/conversations/{conversation_id}/items/{item_id}"): lambda c, o: (
        c.conversations.items.retrieve(o.item, conversation_id=o.conversation)
    ),
    ("delete", "/v1/conversations/{conversation_id}/items/{item_id}"): lambda c, o: (
        c.conversations.items.delete(o.item, conversation_id=o.conversation)
    ),
    ("get", "/v1/vector_stores"): lambda c, o: c.vector_stores.list(after=o.vector_store),
    ("get", "/v1/vector_stores/{vector_store_id}"): lambda c, o: c.vector_stores.retrieve(o.vector_store),
    ("post", "/v1/vector_stores/{vector_store_id}"): lambda c, o: c.vector_stores.update(
        o.vector_store, name="renamed"
    ),
    ("delete", "/v1/vector_stores/{vector_store_id}"): lambda c, o: c.vector_stores.delete(o.vector_store),
    ("post", "/v1/vector_stores/{vector_store_id}/search"): lambda c, o: c.vector_stores.search(
        o.vector_store, query="vault code"
    ),
    ("post", "/v1/vector_stores/{vector_store_id}/files"): lambda c, o: c.vector_stores.files.create(
        o.vector_store, file_id=o.vector_file
    ),
    ("get", "/v1/vector_stores/{vector_store_id}/files"): lambda c, o: c.vector_stores.files.list(
        o.vector_store
    ),
    ("get", "/v1/vector_stores/{vector_store_id}/files/{file_id}"): lambda c, o: (
        c.vector_stores.files.retrieve(o.vector_file, vector_store_id=o.vector_store)
    ),
    ("post", "/v1/vector_stores/{vector_store_id}/files/{file_id}"): lambda c, o: (
        c.vector_stores.files.update(o.vector_file, vector_store_id=o.vector_store, attributes={"a": "b"})
    ),
    ("delete", "/v1/vector_stores/{vector_store_id}/files/{file_id}"): lambda c, o: (
        c.vector_stores.files.delete(o.vector_file, vector_store_id=o.vector_store)
    ),
    ("get", "/v1/vector_stores/{vector_store_id}/files/{file_id}/content"): lambda c, o: (
        c.vector_stores.files.content(o.vector_file, vector_store_id=o.vector_store)
    ),
    ("post", "/v1/vector_stores/{vector_store_id}/file_batches"): lambda c, o: (
        c.vector_stores.file_batches.create(o.vector_store, file_ids=[o.vector_file])
    ),
    ("get", "/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}"): lambda c, o: (
        c.vector_stores.file_batches.retrieve(o.file_batch, vector_store_id=o.vector_store)
    ),
    ("post", "/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel"): lambda c, o: (
        c.vector_stores.file_batches.cancel(o.file_batch, vector_store_id=o.vector_store)
    ),
    ("get", "/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/files"): lambda c, o: (
        c.vector_stores.file_batches.list_files(o.file_batch, vector_store_id=o.vector_store)
    ),
}
# Routes that reach no stored object by an id from the client (a new one must be put in one of the two).
REACHES_NONE = {
    ("get", "/v1/models"),
    ("get", "/v1/models/{model_id}"),
    ("post", "/v1/chat/completions"),
    ("post", "/v1/completions"),
    ("post", "/v1/embeddings"),
    ("post", "/v1/audio/speech"),
    ("get", "/v1/audio/voices"),
    ("post", "/v1/audio/transcriptions"),
    ("post", "/v1/audio/translations"),
    ("post", "/v1/files"),
    ("post", "/v1/uploads"),
    ("post", "/v1/batches"),  # its input file is read as its project's when it runs: the test below
    ("post", "/v1/conversations"),
    ("post", "/v1/vector_stores"),
    ("post", "/generate"),
    ("get", "/health"),
    ("post", "/v1/realtime/client_secrets"),
    # A call in progress is held in memory, not stored; another project's key cannot reach it (a 404):
    # test_webrtc.py checks that on a real call.
    ("post", "/v1/realtime/calls"),
    *{
        ("post", f"/v1/realtime/calls/{{call_id}}/{action}")
        for action in ("hangup", "accept", "reject", "refer")
    },
    # Anthropic's and Ollama's faces: requests of the rows above, and models by name.
    ("post", "/v1/messages"),
    ("post", "/v1/messages/count_tokens"),
    ("post", "/v1/messages/batches"),  # its requests' file and batch made as the rows above make them
    *{("post", f"/api/{name}") for name in ("chat", "generate", "embed", "embeddings", "show")},
    *{("get", f"/api/{name}") for name in ("tags", "ps", "version")},
    *{("post", f"/api/{name}") for name in ("pull", "push", "create", "copy")},
    ("delete", "/api/delete"),
}


def test_every_route_is_in_the_isolation_matrix(tenants: Tenants) -> None:
    schema = httpx.get(f"{tenants.served.url}/openapi.json").json()
    routes = {(verb, path) for path, verbs in schema["paths"].items() for verb in verbs}
    routes = {(verb, path) for verb, path in routes if not path.startswith("/v1/organization")}
    assert routes == set(REACHES) | REACHES_NONE


def test_every_row_that_reaches_a_stored_object_by_id_is_tried_across_projects() -> None:
    # The operation table says which rows reach stored objects: a new one without a case here fails.
    by_id = {(op.method.lower(), op.route) for op in OPERATIONS if op.stored and op.path_names()}
    assert by_id <= set(REACHES), sorted(by_id - set(REACHES))


@pytest.mark.parametrize("route", sorted(REACHES), ids=lambda r: f"{r[0]} {r[1]}")
def test_another_projects_object_is_a_404_and_ones_own_is_reached(
    tenants: Tenants, route: tuple[str, str]
) -> None:
    owned = make(tenants.alpha)
    with pytest.raises(openai.NotFoundError):
        REACHES[route](tenants.beta, owned)
    try:
        REACHES[route](tenants.alpha, owned)
    except openai.NotFoundError:
        pytest.fail(f"{route} does not reach the project's own object")
    except (openai.BadRequestError, openai.ConflictError):
        pass  # reached, and refused for what it is (a finished response or batch cannot be cancelled, ...)


def test_a_batch_on_another_projects_file_fails_without_reading_it(tenants: Tenants) -> None:
    # As OpenAI, a batch naming a file it cannot have is made, then fails while it validates.
    owned = make(tenants.alpha)
    made = tenants.beta.batches.create(
        input_file_id=owned.file, endpoint="/v1/chat/completions", completion_window="24h"
    )
    deadline = time.monotonic() + 30
    while (batch := tenants.beta.batches.retrieve(made.id)).status == "validating":
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert batch.status == "failed"
    assert batch.errors
    assert [e.code for e in batch.errors.data or []] == ["invalid_request"]
    assert batch.request_counts
    assert batch.request_counts.total == 0


def test_a_turn_cannot_continue_another_projects_conversation(tenants: Tenants) -> None:
    owned = make(tenants.alpha)
    with pytest.raises(openai.NotFoundError):
        tenants.beta.responses.create(model="recall", input="what was it?", conversation=owned.conversation)
    answer = tenants.alpha.responses.create(
        model="recall", input="what was it?", conversation=owned.conversation
    )
    assert "a secret" in answer.output_text


def test_a_turn_cannot_reference_another_projects_item(tenants: Tenants) -> None:
    owned = make(tenants.alpha)
    item = tenants.alpha.responses.retrieve(owned.response).output[0].id
    reference = [{"type": "item_reference", "id": item}]
    with pytest.raises(openai.NotFoundError):
        tenants.beta.responses.create(model="recall", input=reference)  # type: ignore[arg-type]
    assert tenants.alpha.responses.create(model="recall", input=reference).output_text  # type: ignore[arg-type]


def test_lists_show_only_the_projects_own_objects(tenants: Tenants) -> None:
    owned = make(tenants.alpha)
    assert owned.completion not in {c.id for c in tenants.beta.chat.completions.list(limit=100)}
    assert owned.file not in {f.id for f in tenants.beta.files.list(limit=100)}
    assert owned.batch not in {b.id for b in tenants.beta.batches.list(limit=100)}
    assert owned.completion in {c.id for c in tenants.alpha.chat.completions.list(limit=100)}


def test_a_batch_runs_as_its_project_and_its_output_is_the_projects(tenants: Tenants) -> None:
    owned = make(tenants.alpha)
    deadline = time.monotonic() + 60
    while (batch := tenants.alpha.batches.retrieve(owned.batch)).status != "completed":
        assert time.monotonic() < deadline, batch.status
        time.sleep(0.1)
    assert batch.output_file_id is not None
    with pytest.raises(openai.NotFoundError):
        tenants.beta.files.content(batch.output_file_id)
    line = json.loads(tenants.alpha.files.content(batch.output_file_id).read())
    stored = tenants.alpha.chat.completions.list(limit=100)
    assert line["response"]["body"]["choices"][0]["message"]["content"] == "two one"
    assert stored  # its lines ran as alpha's requests


def test_requests_without_a_key_or_with_a_wrong_one_are_401(tenants: Tenants) -> None:
    answer = httpx.get(f"{tenants.served.url}/v1/models")
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "invalid_api_key"
    with pytest.raises(openai.AuthenticationError):
        tenants.client("sk-mp-not-a-key").models.list()


def test_keys_given_with_api_key_still_work_as_the_default_project(tenants: Tenants) -> None:
    static = tenants.client("static-key")
    made = static.chat.completions.create(
        model="reverse", messages=[{"role": "user", "content": "a b"}], store=True
    )
    assert static.chat.completions.retrieve(made.id).id == made.id
    with pytest.raises(openai.NotFoundError):
        tenants.alpha.chat.completions.retrieve(made.id)


def test_a_revoked_key_is_refused_within_the_cache_time(tenants: Tenants) -> None:
    key_id, key = made_key(tenants.database, "alpha")
    client = tenants.client(key)
    assert client.models.list().data
    assert key_id in cli("keys", "list", "--project", "alpha", "--database", tenants.database)
    cli("keys", "revoke", key_id, "--database", tenants.database)  # another process's change
    time.sleep(TTL + 0.1)
    with pytest.raises(openai.AuthenticationError):
        client.models.list()


def test_an_expired_key_is_401(tenants: Tenants) -> None:
    # Two keys, so that a slow command line cannot outlast a short expiry before the first request.
    lasting = tenants.client(new_key(tenants.database, "alpha", "--expires", "1"))
    assert lasting.models.list().data
    expired = tenants.client(new_key(tenants.database, "alpha", "--expires", str(0.5 / 86400)))
    time.sleep(0.6)
    with pytest.raises(openai.AuthenticationError):
        expired.models.list()


def test_the_organization_api_is_for_admin_keys(tenants: Tenants) -> None:
    with pytest.raises(openai.PermissionDeniedError):
        tenants.alpha.get("/organization/projects", cast_to=object)
    with pytest.raises(openai.PermissionDeniedError):
        tenants.client("static-key").get("/organization/projects", cast_to=object)
    assert httpx.get(f"{tenants.served.url}/v1/organization/projects").status_code == 401
    listed = tenants.admin.get("/organization/projects", cast_to=object)
    assert {"alpha", "beta", "ops", "default"} <= {p["name"] for p in listed["data"]}  # type: ignore[index]


def test_projects_and_keys_through_the_organization_api(tenants: Tenants) -> None:
    made: Any = tenants.admin.post("/organization/projects", body={"name": "gamma"}, cast_to=object)
    assert made["object"] == "organization.project"
    key: Any = tenants.admin.post(
        f"/organization/projects/{made['id']}/api_keys", body={"name": "ci"}, cast_to=object
    )
    assert key["value"].startswith("sk-")
    gamma = tenants.client(key["value"])
    assert gamma.models.list().data
    listed: Any = tenants.admin.get(f"/organization/projects/{made['id']}/api_keys", cast_to=object)
    assert [k["id"] for k in listed["data"]] == [key["id"]]
    assert "value" not in listed["data"][0]
    tenants.admin.delete(f"/organization/projects/{made['id']}/api_keys/{key['id']}", cast_to=object)
    time.sleep(TTL + 0.1)
    with pytest.raises(openai.AuthenticationError):
        gamma.models.list()
    with pytest.raises(openai.ConflictError):
        tenants.admin.post("/organization/projects", body={"name": "gamma"}, cast_to=object)


def test_the_store_keeps_only_hashes_of_keys(tenants: Tenants) -> None:
    key = new_key(tenants.database, "beta")
    assert key.encode() not in Path(tenants.database).read_bytes()
    assert key.encode() not in Path(tenants.database + "-wal").read_bytes()


@pytest.mark.slow
def test_a_key_revoked_on_one_replica_is_refused_by_another_sharing_postgresql(postgres: Any) -> None:
    database = postgres.database()
    cli("projects", "create", "alpha", "--database", database)
    cli("projects", "create", "ops", "--database", database)
    key_id, key = made_key(database, "alpha")
    _, admin_key = made_key(database, "ops", "--admin")
    settings = tiny_settings(database)
    settings.models.append(ModelConfig(id=DEFAULT_EMBEDDING, engine="onnx-embedding"))  # vector stores'
    settings.auth = AuthSettings(key_cache_seconds=TTL)
    with faces(settings) as first, faces(settings.model_copy(deep=True)) as second:
        one = openai.OpenAI(base_url=f"{first.url}/v1", api_key=key, max_retries=0)
        other = openai.OpenAI(base_url=f"{second.url}/v1", api_key=key, max_retries=0)
        made = one.chat.completions.create(
            model="reverse", messages=[{"role": "user", "content": "a b"}], store=True
        )
        assert other.chat.completions.retrieve(made.id).id == made.id  # the project's, on either
        admin = openai.OpenAI(base_url=f"{first.url}/v1", api_key=admin_key, max_retries=0)
        project = one.chat.completions.retrieve(made.id)  # still allowed: not yet revoked
        assert project.id == made.id
        alpha: Any = admin.get("/organization/projects/alpha", cast_to=object)
        admin.delete(f"/organization/projects/{alpha['id']}/api_keys/{key_id}", cast_to=object)
        with pytest.raises(openai.AuthenticationError):
            one.models.list()  # at once where it was revoked
        time.sleep(TTL + 0.1)
        with pytest.raises(openai.AuthenticationError):
            other.models.list()  # within the cache time elsewhere


def test_another_projects_files_and_vector_stores_cannot_be_used(tenants: Tenants) -> None:
    owned = make(tenants.alpha)
    with pytest.raises(openai.NotFoundError):
        tenants.beta.vector_stores.create(file_ids=[owned.vector_file])
    own = tenants.beta.vector_stores.create(name="mine")
    with pytest.raises(openai.NotFoundError):
        tenants.beta.vector_stores.files.create(own.id, file_id=owned.vector_file)
    search = {"type": "file_search", "vector_store_ids": [owned.vector_store]}
    with pytest.raises(openai.NotFoundError) as caught:
        tenants.beta.responses.create(model="recall", input="what is the code?", tools=[search])
    assert caught.value.body["param"] == "tools[0].vector_store_ids"


def test_metrics_need_an_admin_key_once_projects_have_keys(tenants: Tenants) -> None:
    # /metrics shows every project's usage: once the store holds keys, only an admin may read it.
    metrics = f"{tenants.served.url}/metrics"
    assert httpx.get(metrics).status_code == 401
    member = httpx.get(metrics, headers={"Authorization": f"Bearer {tenants.alpha.api_key}"})
    assert member.status_code == 403
    admin = httpx.get(metrics, headers={"Authorization": f"Bearer {tenants.admin.api_key}"})
    assert admin.status_code == 200
    assert "modelport_requests_total" in admin.text
