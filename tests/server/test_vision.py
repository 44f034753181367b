"""Images in, on SmolLM2 with a tiny projector the test writes (`tests.support.projector`): images reach
llama.cpp's multimodal path over both faces and the Responses API, only as BMP data URLs modelport made,
from data URLs, file ids and URLs the operator allows; and the shapes that crash other servers each get a
200 or a 4xx while the server stays up."""

from __future__ import annotations

import base64
import http.server
import io
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from PIL import Image

from modelport.settings import ModelConfig, Settings
from tests.support.faces import Faces, faces
from tests.support.projector import tiny_projector

pytestmark = pytest.mark.models  # real models: not the unit tier

MODEL = "seer"


def encoded(image: Image.Image, form: str = "PNG", **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, format=form, **options)
    return out.getvalue()


def picture(width: int = 96, height: int = 64) -> bytes:
    return encoded(Image.linear_gradient("L").convert("RGB").resize((width, height)))


def data_url(content: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64,{base64.b64encode(content).decode()}"


def look(client: Any, *urls: str, **extra: Any) -> Any:
    parts = [{"type": "image_url", "image_url": {"url": url}} for url in urls]
    return client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": [{"type": "text", "text": "What is this?"}, *parts]}],
        **{"max_tokens": 8, "temperature": 0, **extra},
    )


@dataclass
class Seeing:
    served: Faces
    images: str  # a server of image files on 127.0.0.1 that the operator allows


@pytest.fixture(scope="module")
def seeing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Seeing]:
    folder = tmp_path_factory.mktemp("vision")
    projector = tiny_projector(folder / "mmproj-tiny.gguf")
    (folder / "gradient.png").write_bytes(picture())
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(folder), **k)  # noqa: E731
    files = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=files.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{files.server_address[1]}"
    model = ModelConfig(id=MODEL, engine="llamacpp", mmproj=str(projector), n_ctx=4096, n_parallel=2)
    settings = Settings(defaults=False, models=[model], allow_fetch=[address])
    with faces(settings) as served:
        yield Seeing(served, f"http://{address}")
    files.shutdown()


@pytest.mark.parametrize("face", ["http", "in-process"])
def test_an_image_reaches_the_model(seeing: Seeing, face: str) -> None:
    client = seeing.served.face(face)
    answer = look(client, data_url(picture()))
    assert answer.choices[0].message.content
    text_only = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "What is this?"}], max_tokens=8, temperature=0
    )
    assert answer.usage.prompt_tokens > text_only.usage.prompt_tokens  # the image's tokens
    listed = {m.id: m for m in client.models.list().data}
    assert "vision" in listed[MODEL].model_extra["capabilities"]


def test_an_image_survives_the_merging_of_neighbouring_user_messages(seeing: Seeing) -> None:
    """Two user messages in a row (what a conversation's items and a new input make) become one for the
    template: the image in the first is still seen."""
    client = seeing.served.inprocess
    image = {"type": "image_url", "image_url": {"url": data_url(picture())}}

    def prompt_tokens(*messages: Any) -> int:
        answer = client.chat.completions.create(model=MODEL, messages=list(messages), max_tokens=1)
        return int(answer.usage.prompt_tokens)

    seen = prompt_tokens({"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]})
    unseen = prompt_tokens({"role": "user", "content": "What is it?"})
    both = prompt_tokens(
        {"role": "user", "content": [{"type": "text", "text": "What is it?"}, image]},
        {"role": "user", "content": "Well?"},
    )
    text_only = prompt_tokens(
        {"role": "user", "content": "What is it?"}, {"role": "user", "content": "Well?"}
    )
    assert both - text_only == seen - unseen > 0  # the image's tokens


def test_images_by_file_id_by_allowed_url_and_in_the_responses_api(seeing: Seeing) -> None:
    client = seeing.served.http
    stored = client.files.create(file=("g.png", picture()), purpose="vision")
    by_id = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": stored.id}}]}],
        max_tokens=4,
    )
    assert by_id.choices[0].message.content is not None
    assert look(client, f"{seeing.images}/gradient.png").choices[0].message.content is not None
    answer = client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": [
            {"type": "input_text", "text": "Describe it."},
            {"type": "input_image", "image_url": data_url(picture())},
        ]}],
        max_output_tokens=16,
    )  # fmt: skip
    assert answer.status in ("completed", "incomplete")


def test_a_url_the_operator_does_not_allow_is_never_fetched(seeing: Seeing) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        look(seeing.served.http, "http://127.0.0.1:9/secret.png")
    assert refused.value.body["param"] == "messages[0].content[1].image_url.url"


def huge_header() -> bytes:
    """A PNG whose header claims 100000 x 100000 pixels (a decompression bomb's shape)."""
    whole = picture(8, 8)
    start = whole.index(b"IHDR")
    fields = struct.pack(">II", 100_000, 100_000) + whole[start + 12 : start + 17]
    chunk = b"IHDR" + fields
    return (
        whole[: start - 4]
        + struct.pack(">I", 13)
        + chunk
        + struct.pack(">I", zlib.crc32(chunk))
        + whole[start + 21 :]
    )


def animated() -> bytes:
    frames = [Image.new("RGB", (32, 32), colour) for colour in ("red", "green", "blue")]
    return encoded(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)


def rotated_jpeg() -> bytes:
    exif = Image.Exif()
    exif[0x0112] = 6  # orientation: rotate 90°
    return encoded(Image.new("RGB", (120, 40), "white"), "JPEG", exif=exif)


@pytest.mark.parametrize(
    ("name", "content", "ok"),
    [
        ("tiny 1x1", lambda: picture(1, 1), True),
        ("strip 20000x1", lambda: picture(20000, 1), True),
        ("strip 1x20000", lambda: picture(1, 20000), True),
        ("large 4000x3000 jpeg", lambda: encoded(Image.new("RGB", (4000, 3000), "gray"), "JPEG"), True),
        ("animated gif", animated, True),
        ("exif-rotated jpeg", rotated_jpeg, True),
        ("webp", lambda: encoded(Image.new("RGB", (50, 50), "teal"), "WEBP"), True),
        ("bmp", lambda: encoded(Image.new("RGB", (50, 50), "navy"), "BMP"), True),
        ("decompression bomb header", huge_header, False),
        ("zero bytes", lambda: b"", False),
        ("random bytes", lambda: bytes(range(256)) * 4, False),
        ("truncated png", lambda: picture(300, 300)[:400], False),
        ("text as png", lambda: b"this is not an image at all", False),
        ("tiff", lambda: encoded(Image.new("RGB", (20, 20)), "TIFF"), False),
    ],
)
def test_shapes_that_crash_other_servers_get_an_answer(
    seeing: Seeing, name: str, content: Any, ok: bool
) -> None:
    client = seeing.served.http
    if ok:
        assert look(client, data_url(content())).choices[0].message.content is not None
    else:
        with pytest.raises(openai.BadRequestError) as refused:
            look(client, data_url(content()))
        assert refused.value.body["code"] == "invalid_image"
    assert httpx.get(f"{seeing.served.url}/health").status_code == 200


def test_too_many_images_are_a_400(seeing: Seeing) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        look(seeing.served.http, *[data_url(picture(8, 8))] * 50)
    assert refused.value.body["code"] == "too_many_images"


def test_a_broken_data_url_is_a_400(seeing: Seeing) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        look(seeing.served.http, "data:image/png;base64,@@@@")
    assert refused.value.body["param"] == "messages[0].content[1].image_url.url"


def test_a_projector_that_does_not_exist_names_the_file(tmp_path: Path) -> None:
    from modelport.engines.llamacpp.launch import start_server

    with pytest.raises(FileNotFoundError, match="mmproj"):
        start_server(mmproj=str(tmp_path / "missing.gguf"), n_ctx=512)


def test_the_same_image_again_reuses_the_cache_and_a_different_one_changes_the_answer(seeing: Seeing) -> None:
    client = seeing.served.http
    first, second = picture(), encoded(Image.new("RGB", (96, 64), "crimson"))
    one = look(client, data_url(first), logprobs=True, max_tokens=1)
    again = look(client, data_url(first), logprobs=True, max_tokens=1)
    assert again.usage.prompt_tokens_details.cached_tokens > 0  # llama.cpp hashes the image's pixels
    other = look(client, data_url(second), logprobs=True, max_tokens=1)
    assert one.choices[0].logprobs.content[0].logprob == pytest.approx(
        again.choices[0].logprobs.content[0].logprob
    )
    assert other.choices[0].logprobs.content[0].logprob != pytest.approx(
        one.choices[0].logprobs.content[0].logprob, abs=1e-6
    )  # the image is what the model reads


def test_low_detail_is_taken_in_chat_and_responses(seeing: Seeing) -> None:
    client = seeing.served.http
    part = {"type": "image_url", "image_url": {"url": data_url(picture(1200, 900)), "detail": "low"}}
    answer = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": [part]}], max_tokens=4
    )
    assert answer.choices[0].message.content is not None
    response = client.responses.create(
        model=MODEL,
        input=[{"role": "user", "content": [
            {"type": "input_image", "image_url": data_url(picture(1200, 900)), "detail": "low"},
        ]}],
        max_output_tokens=16,
    )  # fmt: skip
    assert response.status in ("completed", "incomplete")


def test_the_in_process_client_reads_an_image_by_its_file_url(seeing: Seeing, tmp_path: Path) -> None:
    (tmp_path / "gradient.png").write_bytes(picture())
    by_path = look(seeing.served.inprocess, (tmp_path / "gradient.png").as_uri(), logprobs=True)
    inline = look(seeing.served.inprocess, data_url(picture()), logprobs=True)
    assert by_path.usage.prompt_tokens == inline.usage.prompt_tokens
    assert by_path.choices[0].logprobs == inline.choices[0].logprobs


def test_a_file_url_is_refused_over_http(seeing: Seeing, tmp_path: Path) -> None:
    (tmp_path / "gradient.png").write_bytes(picture())
    with pytest.raises(openai.BadRequestError) as refused:
        look(seeing.served.http, (tmp_path / "gradient.png").as_uri())
    assert refused.value.body["param"] == "messages[0].content[1].image_url.url"  # type: ignore[index]


def test_images_are_kept_and_replayed_in_later_turns(seeing: Seeing) -> None:
    """A later turn reads the earlier image again, at the same place: its whole first prompt, image
    included, is found in the cache, though other conversations ran in between."""
    client = seeing.served.http
    image = data_url(picture(160, 120))
    content = [{"type": "input_text", "text": "What is it?"}, {"type": "input_image", "image_url": image}]
    first = client.responses.create(
        model=MODEL, input=[{"role": "user", "content": content}], max_output_tokens=16, temperature=0
    )  # type: ignore[list-item]
    for other in ("Hello.", "Good day."):  # other conversations, without images, come in between
        brief = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": other}]
        client.chat.completions.create(model=MODEL, messages=brief, max_tokens=4)  # type: ignore[arg-type]
    later = client.responses.create(
        model=MODEL, previous_response_id=first.id, input="And now?", max_output_tokens=16, temperature=0
    )
    assert later.usage.input_tokens_details.cached_tokens >= first.usage.input_tokens - 1
    kept = client.responses.input_items.list(first.id).data[0]
    assert [part.type for part in kept.content] == ["input_text", "input_image"]

    conversation = client.conversations.create(items=[{"role": "user", "content": content}])  # type: ignore[list-item]
    one = client.responses.create(
        model=MODEL, conversation=conversation.id, input="Well?", max_output_tokens=16
    )
    two = client.responses.create(
        model=MODEL, conversation=conversation.id, input="More?", max_output_tokens=16
    )
    assert two.usage.input_tokens_details.cached_tokens >= one.usage.input_tokens - 1

    chat = [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": image}}]
    stored = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": chat}], store=True, max_tokens=4
    )  # type: ignore[list-item]
    message = client.chat.completions.messages.list(stored.id).data[0]
    assert [part.type for part in message.content_parts or []] == ["text", "image_url"]
