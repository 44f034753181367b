"""Files in chat and Responses inputs — by id, inline and by URL — reach the model as their text; images
and audio are refused by name; and every URL goes through the one fetch guard: public https only unless
the operator allows a host, checked again on each redirect, bounded in size and time. `recall` answers
with what it was given, so what reached the model is what it says."""

from __future__ import annotations

import base64
import http.server
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from modelport.engines.document_text import UnreadableError, document_text
from modelport.settings import Limits
from tests.support.certificates import authority
from tests.support.configs import tiny_settings
from tests.support.documents import pdf
from tests.support.faces import Faces, faces
from tests.support.live import free_port
from tests.support.machine_load import slack


def file_part(**file: str) -> dict[str, Any]:
    return {"type": "file", "file": file}


def recall(client: Any, *parts: dict[str, Any]) -> str:
    content = [{"type": "text", "text": "Read this."}, *parts]
    answer = client.chat.completions.create(model="recall", messages=[{"role": "user", "content": content}])
    return str(answer.choices[0].message.content)


def test_a_file_by_id_and_an_inline_pdf_reach_the_model_as_text(tiny: Any) -> None:
    uploaded = tiny.files.create(file=("notes.md", b"# Notes\nThe vault code is 4711."), purpose="user_data")
    said = recall(tiny, file_part(file_id=uploaded.id))
    assert "The vault code is 4711." in said
    encoded = base64.b64encode(pdf("Quarterly revenue grew by 12 percent")).decode()
    said = recall(tiny, file_part(file_data=f"data:application/pdf;base64,{encoded}", filename="q3.pdf"))
    assert "Quarterly revenue grew by 12 percent" in said


def test_responses_input_file_reaches_the_model(tiny: Any) -> None:
    uploaded = tiny.files.create(file=("fact.txt", b"Otters hold hands while sleeping."), purpose="user_data")
    answer = tiny.responses.create(
        model="recall",
        input=[
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What does the file say?"},
                    {"type": "input_file", "file_id": uploaded.id},
                ],
            }
        ],
    )
    assert "Otters hold hands while sleeping." in answer.output_text


def test_images_and_audio_are_refused_by_name_not_a_500(tiny: Any) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    with pytest.raises(openai.BadRequestError) as refused:
        recall(tiny, image)
    assert refused.value.body["code"] == "model_not_multimodal"
    assert refused.value.body["param"] == "messages[0].content[1].type"
    assert "recall" in refused.value.message
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    with pytest.raises(openai.BadRequestError):
        recall(tiny, audio)
    image_part = {"type": "input_image", "image_url": "https://example.com/a.png"}
    with pytest.raises(openai.BadRequestError) as named:
        tiny.responses.create(
            model="recall",
            instructions="Be brief.",
            input=[{"role": "user", "content": "hello"}, {"role": "user", "content": [image_part]}],
        )
    assert named.value.body["param"] == "input[1].content[0].type"  # as the Responses request names it


def test_bad_files_are_a_400_naming_the_part(tiny: Any) -> None:
    with pytest.raises(openai.NotFoundError):
        recall(tiny, file_part(file_id="file-nope"))
    with pytest.raises(openai.BadRequestError) as not_base64:
        recall(tiny, file_part(file_data="%%%"))
    assert not_base64.value.body["param"] == "messages[0].content[1].file.file_data"
    binary = base64.b64encode(b"\x00\x01\x02" * 100).decode()
    with pytest.raises(openai.BadRequestError):
        recall(tiny, file_part(file_data=binary, filename="blob.bin"))
    with pytest.raises(openai.BadRequestError):
        recall(tiny, file_part(file_data=base64.b64encode(b"%PDF-1.4 broken").decode()))
    with pytest.raises(openai.BadRequestError):
        recall(tiny, file_part(filename="nothing.txt"))


class Listener:
    """An HTTP server on 127.0.0.1 (HTTPS, with `tls`) that records each request; `routes` maps a path to
    (status, headers, body), or to None to hang."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.seen: list[str] = []
        self.routes: dict[str, tuple[int, dict[str, str], bytes] | None] = {}
        listener = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                listener.seen.append(self.path)
                route = listener.routes.get(self.path, (404, {}, b""))
                if route is None:
                    time.sleep(5)
                    return
                status, headers, body = route
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def listeners() -> Iterator[tuple[Listener, Listener]]:
    allowed, private = Listener(), Listener()
    yield allowed, private
    allowed.server.shutdown()
    private.server.shutdown()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Listener, Path]]:
    """An HTTPS listener for `localhost`, and the file of the authority that signed its certificate."""
    ca, served = authority(tmp_path_factory.mktemp("authority"))
    listener = Listener(served)
    yield listener, ca
    listener.server.shutdown()


@pytest.fixture(scope="module")
def guarded(
    tmp_path_factory: pytest.TempPathFactory,
    listeners: tuple[Listener, Listener],
    secured: tuple[Listener, Path],
) -> Iterator[Faces]:
    """A server that allows fetching from the first listener and the HTTPS one only, with small limits."""
    allowed, _ = listeners
    settings = tiny_settings(str(tmp_path_factory.mktemp("fetch") / "state.db"))
    settings.allow_fetch = [f"127.0.0.1:{allowed.port}", f"localhost:{secured[0].port}"]
    settings.limits = Limits(fetch_bytes=1000, fetch_seconds=1.0)
    with faces(settings) as served:
        yield served


def by_url(client: Any, url: str) -> str:
    answer = client.responses.create(
        model="recall",
        input=[{"role": "user", "content": [{"type": "input_file", "file_url": url}]}],
    )
    return str(answer.output_text)


def test_an_allowed_host_is_fetched_and_its_text_reaches_the_model(
    guarded: Faces, listeners: tuple[Listener, Listener]
) -> None:
    allowed, _ = listeners
    allowed.routes["/memo.txt"] = (200, {"Content-Type": "text/plain"}, b"Meet at noon.")
    assert "Meet at noon." in by_url(guarded.http, f"http://127.0.0.1:{allowed.port}/memo.txt")


def test_https_is_fetched_as_the_machines_trust_store_says(
    guarded: Faces, secured: tuple[Listener, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    listener, ca = secured
    listener.routes["/memo.txt"] = (200, {"Content-Type": "text/plain"}, b"Meet at two.")
    url = f"https://localhost:{listener.port}/memo.txt"
    # An authority in no store the machine has (the run's own is another): its certificate is refused.
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    with pytest.raises(openai.BadRequestError) as refused:
        by_url(guarded.http, url)
    assert refused.value.body["code"] == "invalid_url"
    assert listener.seen == []  # the handshake failed: no request was made
    # Named by SSL_CERT_FILE, as OpenSSL reads it for the machine's store, it is trusted.
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    assert "Meet at two." in by_url(guarded.http, url)
    assert listener.seen == ["/memo.txt"]


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1:{private}/secret",
        "http://127.0.0.1:{private}/secret",
        "https://localhost:{private}/secret",  # a name that resolves to loopback
        "https://[::1]:{private}/secret",
        "https://[::ffff:127.0.0.1]:{private}/secret",
        "https://[::127.0.0.1]:{private}/secret",  # IPv4-compatible
        "https://[::ffff:0:127.0.0.1]:{private}/secret",  # IPv4-translated
        "https://[64:ff9b::7f00:1]:{private}/secret",  # NAT64, the well-known prefix
        "https://[64:ff9b:1::a9fe:a9fe]/latest/meta-data/",  # NAT64, a local-use prefix
        "https://[64:ff9b::a9fe:a9fe]/latest/meta-data/",  # 169.254.169.254 behind NAT64
        "http://0177.0.0.1:{private}/secret",  # octal
        "http://[::1/secret",  # not a URL
        "https://10.0.0.1/secret",
        "https://192.168.1.1/secret",
        "https://169.254.169.254/latest/meta-data/",
        "https://100.64.0.1/secret",
        "https://0.0.0.0:{private}/secret",
        "file:///etc/passwd",
        "https://user:pass@example.com/",
        "http://127.0.0.1:{allowed}/to-private",  # an allowed host redirecting to one that is not
    ],
)
def test_urls_to_private_addresses_are_refused_and_reach_nothing(
    guarded: Faces, listeners: tuple[Listener, Listener], url: str
) -> None:
    allowed, private = listeners
    allowed.routes["/to-private"] = (302, {"Location": f"http://127.0.0.1:{private.port}/secret"}, b"")
    private.seen.clear()
    with pytest.raises(openai.BadRequestError) as refused:
        by_url(guarded.http, url.format(private=private.port, allowed=allowed.port))
    assert refused.value.body["code"] == "invalid_url"
    assert refused.value.body["param"] == "input[0].content[0].file.file_url"
    assert private.seen == []


def test_a_fetch_is_bounded_in_size_and_time(guarded: Faces, listeners: tuple[Listener, Listener]) -> None:
    allowed, _ = listeners
    allowed.routes["/big.txt"] = (200, {}, b"x" * 1001)
    allowed.routes["/slow.txt"] = None
    with pytest.raises(openai.BadRequestError) as big:
        by_url(guarded.http, f"http://127.0.0.1:{allowed.port}/big.txt")
    assert "limit" in big.value.message
    started = time.monotonic()
    with pytest.raises(openai.BadRequestError) as slow:
        by_url(guarded.http, f"http://127.0.0.1:{allowed.port}/slow.txt")
    assert "1 s" in slow.value.message
    assert time.monotonic() - started < 4 * slack()


def test_a_pdf_pypdf_refuses_is_read_as_browsers_read_it() -> None:
    # No cross-reference table and no `startxref` (pypdf: "startxref not found"), as the OpenResponses
    # compliance suite's PDF is made: PDFium rebuilds the table and reads the text.
    made = pdf("Quarterly revenue grew by 12 percent")
    broken = made[: made.find(b"xref")] + made[made.find(b"trailer") : made.find(b"startxref")] + b"%%EOF\n"
    assert document_text("q3.pdf", broken) == "Quarterly revenue grew by 12 percent"
    with pytest.raises(UnreadableError):  # objects alone, no trailer: no reader finds the document
        document_text("q3.pdf", made[: made.find(b"xref")])
