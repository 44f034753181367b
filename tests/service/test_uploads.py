"""The Uploads API through the `openai` SDK, on both faces: a file sent in parts (the SDK's
`upload_file_chunked`) becomes a File with the very bytes sent, the parts joined in the order the completion
names; what an upload refuses (a part past its size, parts that do not add up, a wrong md5, anything after
it ended), and an upload past its hour expired with its parts deleted."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from modelport.service.state import uploads
from modelport.settings import FileSettings
from tests.support.configs import tiny_models
from tests.support.faces import Faces, faces

KEY = "sk-uploads"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    folder = tmp_path_factory.mktemp("uploads")
    settings = tiny_models(str(folder / "state.db"), KEY, reverse="reverse_chat")
    settings.files = FileSettings(dir=str(folder / "files"))
    with faces(settings, api_key=KEY) as served:
        yield served


def parts_left(served: Faces) -> list[str]:
    folder = Path(served.service.settings.files.folder()) / "uploads"
    return [str(p) for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


@pytest.mark.parametrize("face", ["http", "in-process"])
def test_a_file_sent_in_parts_is_a_file_of_the_bytes_sent(served: Faces, face: str, tmp_path: Path) -> None:
    client = served.face(face)
    data = os.urandom(250_000)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    upload = client.uploads.upload_file_chunked(
        file=path, mime_type="application/octet-stream", purpose="assistants", part_size=100_000
    )
    assert upload.status == "completed"
    assert upload.id.startswith("upload_")
    assert upload.file is not None
    assert (upload.file.filename, upload.file.bytes, upload.file.purpose) == (
        "big.bin",
        250_000,
        "assistants",
    )
    assert client.files.retrieve(upload.file.id).bytes == 250_000
    assert client.files.content(upload.file.id).read() == data
    assert parts_left(served) == []


def test_the_parts_are_joined_in_the_order_named_and_checked(served: Faces) -> None:
    client = served.face("http")
    made = client.uploads.create(
        bytes=10, filename="digits.txt", mime_type="text/plain", purpose="assistants"
    )
    assert (made.status, made.file) == ("pending", None)
    assert made.expires_at - made.created_at == 3600
    tail = client.uploads.parts.create(made.id, data=b"56789")
    assert (tail.object, tail.upload_id) == ("upload.part", made.id)
    with pytest.raises(openai.BadRequestError) as past:
        client.uploads.parts.create(made.id, data=b"123456")  # 11 bytes in all: past the 10 it was made for
    assert past.value.param == "data"
    with pytest.raises(openai.BadRequestError) as short:
        client.uploads.complete(made.id, part_ids=[tail.id])
    assert short.value.param == "part_ids"
    head = client.uploads.parts.create(made.id, data=b"01234")
    for part_ids in ([head.id, head.id], [head.id, "part_elsewhere"]):
        with pytest.raises(openai.BadRequestError):
            client.uploads.complete(made.id, part_ids=part_ids)
    with pytest.raises(openai.BadRequestError) as wrong:
        client.uploads.complete(made.id, part_ids=[head.id, tail.id], md5=hashlib.md5(b"no").hexdigest())
    assert wrong.value.param == "md5"
    done = client.uploads.complete(
        made.id, part_ids=[head.id, tail.id], md5=hashlib.md5(b"0123456789").hexdigest()
    )
    assert done.status == "completed"
    assert done.file is not None
    assert client.files.content(done.file.id).read() == b"0123456789"
    for after in (
        lambda: client.uploads.parts.create(made.id, data=b"x"),
        lambda: client.uploads.complete(made.id, part_ids=[head.id, tail.id]),
        lambda: client.uploads.cancel(made.id),
    ):
        with pytest.raises(openai.BadRequestError, match="is completed"):
            after()
    with pytest.raises(openai.NotFoundError):
        client.uploads.cancel("upload_nothing")


def test_a_cancelled_upload_takes_no_part_and_keeps_none(served: Faces) -> None:
    client = served.face("in-process")
    made = client.uploads.create(bytes=8, filename="a.txt", mime_type="text/plain", purpose="assistants")
    client.uploads.parts.create(made.id, data=b"abcd")
    assert client.uploads.cancel(made.id).status == "cancelled"
    with pytest.raises(openai.BadRequestError, match="is cancelled"):
        client.uploads.parts.create(made.id, data=b"efgh")
    assert parts_left(served) == []


def test_an_upload_past_its_hour_is_expired_and_its_parts_deleted(
    served: Faces, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = served.face("http")
    made = client.uploads.create(bytes=8, filename="a.txt", mime_type="text/plain", purpose="assistants")
    part = client.uploads.parts.create(made.id, data=b"abcd")
    later = uploads.now() + uploads.LIFETIME + 1
    monkeypatch.setattr(uploads, "now", lambda: later)
    with pytest.raises(openai.BadRequestError, match="is expired"):
        client.uploads.complete(made.id, part_ids=[part.id])
    client.uploads.create(bytes=1, filename="b.txt", mime_type="text/plain", purpose="assistants")
    assert parts_left(served) == []  # found expired by the next upload made


def test_an_upload_larger_than_a_file_may_be_is_refused_at_once(served: Faces) -> None:
    with pytest.raises(openai.APIStatusError) as refused:
        served.face("http").uploads.create(
            bytes=10**12, filename="huge.bin", mime_type="application/octet-stream", purpose="batch"
        )
    assert refused.value.status_code == 413


@pytest.mark.parametrize("face", ["http", "in-process"])
def test_every_purpose_openai_s_files_take_is_kept_and_listed(served: Faces, face: str) -> None:
    """`evals` among them, which the SDK's `FileObject` does not list: validating the File object refused it
    (a 500 after the file was kept, and every later listing of the project's files a 500 too)."""
    client = served.face(face)
    line = (
        b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "reverse"}}\n'
    )
    made = {}
    for purpose in ("assistants", "batch", "fine-tune", "vision", "user_data", "evals"):
        made[purpose] = client.files.create(file=("f.jsonl", line), purpose=purpose)  # type: ignore[arg-type]
        assert made[purpose].purpose == purpose
        assert client.files.retrieve(made[purpose].id).purpose == purpose
    listed = {file.id: file.purpose for file in client.files.list()}
    assert {file.id: purpose for purpose, file in made.items()}.items() <= listed.items()
    upload = client.uploads.create(bytes=4, filename="e.jsonl", mime_type="text/jsonl", purpose="evals")  # type: ignore[arg-type]
    part = client.uploads.parts.create(upload.id, data=b"four")
    assert client.uploads.complete(upload.id, part_ids=[part.id]).file.purpose == "evals"  # type: ignore[union-attr]
