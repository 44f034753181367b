"""The playground at `/`, driven in a real browser (Debian's chromium through Playwright) against live
servers: chat that streams, a tool call, JSON mode, an attached image, a recorded message, a spoken answer,
embeddings, speech that plays, an uploaded file transcribed, the API-key prompt, keyboard and phone width.
Screenshots go to MODELPORT_SCREENSHOTS (or the test's temporary folder)."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from modelport.server import create_app
from modelport.settings import ModelConfig, Settings
from tests.support.faces import Faces
from tests.support.live import serve_app
from tests.support.wav import wav

pytestmark = pytest.mark.slow  # a headless Chromium

CHROMIUM = Path("/usr/bin/chromium")
TIMEOUT_MS = 90_000


@pytest.fixture(scope="module")
def playwright() -> Iterator[Any]:
    """Playwright, for headless chromium; skipped where chromium is not installed, unless
    MODELPORT_REQUIRE_BROWSER is set (as CI sets it), where its absence is a failure."""
    if not CHROMIUM.exists():
        if os.environ.get("MODELPORT_REQUIRE_BROWSER"):
            pytest.fail("chromium is not installed (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as started:
        yield started


@pytest.fixture(scope="module")
def browser(playwright: Any) -> Iterator[Any]:
    launched = playwright.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=["--no-sandbox"])
    yield launched
    launched.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = Path(os.environ.get("MODELPORT_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser: Any, server: Faces) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1000, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.set_default_timeout(TIMEOUT_MS)
    opened.goto(server.url)
    opened.wait_for_function("document.querySelector('#chat-form select[name=model]').options.length > 0")
    yield opened
    context.close()
    assert errors == []  # no uncaught script error on the way


def send(page: Any, message: str) -> Any:
    """Type a message, send it, and wait for the answer's statistics line: the turn is over."""
    done = page.locator(".turn.assistant .stats:not(:empty)").count()
    page.fill("#chat-input", message)
    page.keyboard.press("Control+Enter")
    page.wait_for_function(f"document.querySelectorAll('.turn.assistant .stats:not(:empty)').length > {done}")
    return page.locator(".turn.assistant").last


def test_chat_streams_the_answer_and_shows_its_speed(page: Any, shots: Path) -> None:
    turn = send(page, "Name three colours.")
    assert turn.locator(".content").inner_text().strip()
    assert int(turn.get_attribute("data-chunks")) > 3  # tokens arrived one by one, not as one answer
    stats = turn.locator(".stats").inner_text()
    assert re.fullmatch(r"first token \d+ ms · [\d.]+ tokens/s · \d+ tokens", stats), stats
    page.screenshot(path=shots / "chat.png", full_page=True)


@pytest.mark.slow
def test_a_tool_call_is_shown_as_it_streams(page: Any, shots: Path) -> None:
    page.click("summary")
    page.check("input[name=use_tools]")
    page.select_option("select[name=tool_choice]", "required")
    turn = send(page, "What is the weather in Paris?")
    call = turn.locator(".tool-call").first.inner_text()
    name, _, arguments = call.partition("(")
    assert name == "get_weather"
    assert "city" in json.loads(arguments.removesuffix(")"))
    page.screenshot(path=shots / "tool-call.png", full_page=True)


def test_the_chosen_model_is_shown_called_from_code_on_each_face(page: Any, server: Faces) -> None:
    page.click("#chat-code summary")
    code = page.locator("#chat-code code").inner_text()
    model = page.locator("#chat-form select[name=model]").input_value()
    assert f'OpenAI(base_url="{server.url}/v1"' in code
    assert f'anthropic.Anthropic(base_url="{server.url}"' in code
    assert f'ollama.Client(host="{server.url}")' in code
    assert code.count(f'model="{model}"') == 3


def test_json_mode_answers_json(page: Any) -> None:
    page.check("input[name=json]")
    page.fill("input[name=temperature]", "0")  # sampled, a 135M model may ramble in digits past max_tokens
    turn = send(page, "Give a JSON object with a name and an age.")
    assert isinstance(json.loads(turn.locator(".content").inner_text()), dict)


def test_embeddings_compare_texts_by_cosine_similarity(page: Any, shots: Path) -> None:
    page.click("#tab-embeddings")
    page.click("#embeddings-form button[type=submit]")
    cells = page.locator("#similarity tbody td")
    cells.first.wait_for()
    values = [float(v) for v in cells.all_inner_texts()]
    assert len(values) == 9
    assert values[0] == values[4] == values[8] == 1.0
    assert values[1] > values[2]  # the cat and the kitten are closer than the cat and the stock market
    page.screenshot(path=shots / "embeddings.png", full_page=True)


def test_speech_plays_and_can_be_downloaded(page: Any, shots: Path) -> None:
    page.click("#tab-speech")
    assert page.locator("#speech-form select[name=voice] option").all_inner_texts() == ["joe"]
    page.select_option("#speech-form select[name=response_format]", "wav")
    page.click("#speech-form button[type=submit]")
    page.wait_for_function("document.querySelector('#speech-audio').duration > 0")
    assert 1 < page.evaluate("document.querySelector('#speech-audio').duration") < 10
    link = page.locator("#speech-download")
    assert link.get_attribute("download") == "speech.wav"
    assert link.get_attribute("href").startswith("blob:")
    page.screenshot(path=shots / "speech.png", full_page=True)


def test_an_uploaded_file_is_transcribed_with_segment_times(
    page: Any, shots: Path, http_client: openai.OpenAI, tmp_path: Path
) -> None:
    recording = tmp_path / "coffee.wav"
    speech = http_client.audio.speech.create(
        model="tts-1", voice="alloy", input="Please bring me a cup of hot coffee.", response_format="wav"
    )
    recording.write_bytes(speech.content)
    page.click("#tab-transcription")
    page.set_input_files("#transcription-form input[type=file]", str(recording))
    page.click("#transcription-form button[type=submit]")
    text = page.locator("#transcript-result .transcript")
    text.wait_for()
    assert "coffee" in text.inner_text().lower()
    assert re.match(r"0:00\.\d – 0:0\d\.\d", page.locator("#transcript-result td").first.inner_text())
    page.screenshot(path=shots / "transcription.png", full_page=True)


def test_tabs_follow_the_arrow_keys(page: Any) -> None:
    page.focus("#tab-chat")
    page.keyboard.press("ArrowRight")
    assert page.get_attribute("#tab-embeddings", "aria-selected") == "true"
    assert page.locator("#embeddings").is_visible()
    assert not page.locator("#chat").is_visible()
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("ArrowLeft")
    assert page.get_attribute("#tab-voice", "aria-selected") == "true"  # round from the first to the last


def test_a_phone_width_screen_needs_no_sideways_scrolling(page: Any, shots: Path) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    send(page, "Hello!")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.screenshot(path=shots / "phone.png", full_page=True)


def test_a_server_with_keys_asks_for_one_and_then_works(browser: Any, shots: Path) -> None:
    with serve_app(create_app(Settings(api_keys=["sesame"], preload=False))) as url:
        assert httpx.get(f"{url}/").status_code == 200  # the page itself needs no key
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.locator("#key").wait_for()
        assert page.evaluate("document.activeElement.id") == "api-key"
        page.fill("#api-key", "wrong")
        page.keyboard.press("Enter")
        page.wait_for_function("document.querySelector('#key .error').textContent.length > 0")
        page.screenshot(path=shots / "key.png")
        page.fill("#api-key", "sesame")
        page.keyboard.press("Enter")
        page.locator("#key").wait_for(state="hidden")
        turn = send(page, "Hi!")
        assert turn.locator(".content").inner_text().strip()
        page.close()


def test_a_thinking_models_thinking_is_folded_away_above_its_answer(browser: Any, shots: Path) -> None:
    from tests.support.families import template

    thinker = ModelConfig.model_validate(
        {"id": "thinker", "engine": "llamacpp", "chat_template": template("deepseek-r1"), "n_parallel": 1}
    )
    with serve_app(create_app(Settings(defaults=False, models=[thinker], preload=False))) as url:
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.wait_for_function("document.querySelector('#chat-form select[name=model]').options.length > 0")
        turn = send(page, "What is 2 + 3?")
        fold = turn.locator("details.thinking")
        # Whether this model writes anything before it closes the thinking is its own affair: the fold is
        # there exactly when the statistics count thinking tokens, folded away until opened.
        counted = re.search(r"\d+ tokens \(\d+ thinking\)$", turn.locator(".stats").inner_text())
        assert fold.count() == (1 if counted else 0)
        if counted:
            assert fold.get_attribute("open") is None
            assert (fold.locator(".content").text_content() or "").strip()  # hidden, but there
            fold.locator("summary").click()
        page.screenshot(path=shots / "thinking.png", full_page=True)
        page.close()


def test_no_ui_serves_no_page() -> None:
    with serve_app(create_app(Settings(ui=False, preload=False, defaults=False))) as url:
        assert httpx.get(f"{url}/").status_code == 404
        assert httpx.get(f"{url}/ui/app.js").status_code == 404


def sent_body(page: Any, message: str) -> tuple[dict[str, Any], Any]:
    """Send a message as `send` does, and the chat request's body the page sent with it."""
    with page.expect_request("**/v1/chat/completions") as request:
        turn = send(page, message)
    return request.value.post_data_json, turn


def test_an_attached_image_goes_with_the_message(browser: Any, shots: Path, tmp_path: Path) -> None:
    from tests.server.test_vision import MODEL, picture
    from tests.support.projector import tiny_projector

    (tmp_path / "gradient.png").write_bytes(picture())
    model = ModelConfig(id=MODEL, engine="llamacpp", mmproj=str(tiny_projector(tmp_path / "mmproj.gguf")))
    with serve_app(create_app(Settings(defaults=False, models=[model]))) as url:
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(url)
        page.wait_for_function("document.querySelector('#chat-form select[name=model]').options.length > 0")
        page.set_input_files("#chat-form input[name=image]", str(tmp_path / "gradient.png"))
        page.locator("#attachments img").wait_for()
        body, turn = sent_body(page, "What is this?")
        parts = body["messages"][-1]["content"]
        assert parts[0] == {"type": "text", "text": "What is this?"}
        assert parts[1]["image_url"]["url"].startswith("data:image/png;base64,")
        assert page.locator(".turn.user img").count() == 1
        assert page.locator("#attachments li").count() == 0  # sent, so no longer waiting
        assert turn.locator(".content").inner_text().strip()
        page.screenshot(path=shots / "chat-image.png", full_page=True)
        page.close()


def with_microphone(playwright: Any, recording: Path) -> Any:
    """Headless chromium whose microphone plays `recording` (a WAV file) over and over."""
    return playwright.chromium.launch(
        executable_path=str(CHROMIUM),
        headless=True,
        args=[
            "--no-sandbox",
            "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={recording}",
            "--autoplay-policy=no-user-gesture-required",
        ],
    )


def test_a_recorded_message_is_sent_as_wav_audio(
    playwright: Any, server: Faces, http_client: openai.OpenAI, tmp_path: Path
) -> None:
    """Chromium's fake microphone plays a file Piper spoke; what the page sends is heard back."""
    said = "The library opens at nine in the morning."
    speech = http_client.audio.speech.create(model="tts-1", voice="alloy", input=said, response_format="wav")
    (tmp_path / "said.wav").write_bytes(speech.content)
    listening = with_microphone(playwright, tmp_path / "said.wav")
    page = listening.new_context(permissions=["microphone"]).new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.wait_for_function("document.querySelector('#chat-form select[name=model]').options.length > 0")
    page.click("#chat-record")
    page.wait_for_function("document.querySelector('#chat-record').textContent === 'Stop recording'")
    page.wait_for_timeout(3500)
    page.click("#chat-record")
    page.locator("#attachments li").wait_for()
    body, turn = sent_body(page, "")
    answered = turn.locator(".content").inner_text().strip()
    listening.close()
    audio = body["messages"][-1]["content"][0]
    assert audio["type"] == "input_audio"
    assert audio["input_audio"]["format"] == "wav"
    wav = base64.b64decode(audio["input_audio"]["data"])
    heard = http_client.audio.transcriptions.create(model="whisper-1", file=("said.wav", wav)).text
    assert "library" in heard.lower()
    assert answered


def test_a_spoken_answer_plays_and_is_named_by_its_id_later(page: Any, shots: Path) -> None:
    page.check("input[name=speak]")
    # Short answers: each is spoken whole before its turn ends (the form's 256 tokens, 30 s of the suite).
    page.fill("#chat-form input[name=max_tokens]", "24")
    body, turn = sent_body(page, "Say hello.")
    assert body["modalities"] == ["text", "audio"]
    assert body["audio"] == {"voice": "alloy", "format": "pcm16"}
    assert turn.locator(".content").inner_text().strip()  # the transcript, shown as it streams
    assert float(turn.get_attribute("data-audio-seconds")) > 0.3
    body, turn = sent_body(page, "And again.")
    earlier = body["messages"][-2]
    assert earlier["role"] == "assistant"
    assert earlier["audio"]["id"].startswith("audio_")
    assert float(turn.get_attribute("data-audio-seconds")) > 0.3
    page.screenshot(path=shots / "chat-spoken.png", full_page=True)


def voice_log_shows(page: Any, condition: str, errors: list[str]) -> None:
    """Wait for the voice log's data (`data`: the element's dataset) to meet `condition`; Playwright's
    timeout says nothing of the call, so a failure says what the page showed."""
    try:
        page.wait_for_function(f"(data => {condition})(document.querySelector('#voice-log').dataset)")
    except Exception as error:
        shown = page.evaluate(
            "() => ({log: document.querySelector('#voice-log').innerText, "
            "data: {...document.querySelector('#voice-log').dataset}, "
            "status: document.querySelector('#voice-status').textContent})"
        )
        raise AssertionError(f"the voice log never met {condition}: {shown}, {errors}") from error


def test_the_voice_tab_talks_and_is_interrupted(
    playwright: Any, server: Faces, http_client: openai.OpenAI, tmp_path: Path, shots: Path
) -> None:
    """Chromium's fake microphone says a question, then is silent, then says it again, each time after a
    shorter silence (it loops the file): the first turn is heard and answered aloud, a later one speaks over
    an answer, which the page stops and truncates."""
    said = "What is the weather like in Paris today?"
    speech = http_client.audio.speech.create(model="tts-1", voice="alloy", input=said, response_format="pcm")
    out = tmp_path / "question.wav"
    # The question four times, each followed by a shorter silence (6, 4.5, 3, 2 s), then again: the first
    # answer is heard (with two busy neighbours on 2 cores, 3 s was too little: each answer was cut by the
    # next question before any of it was heard), and some later question comes while its answer plays,
    # whatever the answer's length and the machine's speed. With one gap of 6 s, an answer shorter than
    # the gap left after its start ("The weather in Paris today is quite unusual.") ended before every next
    # question, and nothing was ever cut.
    gaps = (6, 4.5, 3, 2)
    out.write_bytes(wav(b"".join(speech.content + bytes(int(24_000 * gap) * 2) for gap in gaps), 24_000))
    talking = with_microphone(playwright, out)
    page = talking.new_context(permissions=["microphone"]).new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(server.url)
    page.wait_for_function("document.querySelector('#voice-form select[name=model]').options.length > 0")
    page.click("#tab-voice")
    assert page.locator("#voice-form select[name=model]").input_value() == "realtime"
    page.click("#voice-start")
    page.locator("#voice-log .turn.user").first.wait_for()
    heard = page.locator("#voice-log .turn.user .content").first.inner_text()
    voice_log_shows(page, "Number(data.audioSeconds ?? 0) > 0.3", errors)
    page.locator("#voice-log .turn.assistant").first.wait_for()
    voice_log_shows(page, "Number(data.truncated ?? 0) >= 1", errors)
    page.screenshot(path=shots / "voice.png", full_page=True)
    page.click("#voice-start")  # stop
    talking.close()
    # What Whisper made of the question through the browser's microphone is its own ("whether I can pair us
    # today" once): the page shows a heard turn of words; how well it hears is the transcription tests' part.
    assert len(heard.split()) >= 3, heard
    assert errors == []
