"""Models from the Hugging Face Hub: `modelport pull`, `hf://` references and the cache, through
huggingface_hub's real download code against a Hub served on 127.0.0.1 with real model files."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

import modelport
from modelport import hub
from modelport.settings import Settings
from tests.hub import Hub
from tests.support.live import LiveServer, serve_app
from tests.support.projector import tiny_projector
from tests.test_cli import packaged_models

pytestmark = pytest.mark.slow  # a Hub on 127.0.0.1 and `modelport` processes pulling from it

GGUF_REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF"
GGUF_FILE = "smollm2-135m-instruct-q4_1.gguf"
WHISPER_REPO = "Systran/faster-whisper-tiny.en"
VISION_REPO = "modelport-tests/SmolLM2-135M-seeing-GGUF"  # the model and a projector beside it


@pytest.fixture(scope="module")
def test_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Hub, str]]:
    root = tmp_path_factory.mktemp("hub")
    files = packaged_models(root)
    gguf, whisper = root / "gguf", root / "whisper"
    gguf.mkdir()
    whisper.mkdir()
    (gguf / GGUF_FILE).symlink_to(files["gguf"])
    (gguf / "README.md").write_text("SmolLM2 135M Instruct, Q4_1.\n")
    for part in files["whisper"].iterdir():
        (whisper / part.name).symlink_to(part)
    seeing = root / "seeing"
    seeing.mkdir()
    (seeing / GGUF_FILE).symlink_to(files["gguf"])
    tiny_projector(seeing / "mmproj-SmolLM2-135M-f16.gguf")
    tiny_projector(seeing / "mmproj-SmolLM2-135M-q8_0.gguf", seed=1)
    repos = {GGUF_REPO: gguf, WHISPER_REPO: whisper, VISION_REPO: seeing}
    served = Hub(repos, interrupt_once={GGUF_FILE})
    with serve_app(served.app()) as url:
        yield served, url


@pytest.fixture(scope="module")
def hf_env(test_hub: tuple[Hub, str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The environment huggingface_hub reads: this hub, a cache of the test's own, no Xet, no token."""
    return {
        "HF_ENDPOINT": test_hub[1],
        "HF_HOME": str(tmp_path_factory.mktemp("hf-home")),
        "HF_HUB_DISABLE_XET": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
    }


def modelport_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelport.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_pull_picks_the_gguf_resumes_a_dropped_download_and_then_works_offline(
    test_hub: tuple[Hub, str], hf_env: dict[str, str]
) -> None:
    served, _ = test_hub
    result = modelport_cli(hf_env, "pull", GGUF_REPO)
    assert result.returncode == 0, result.stderr
    pulled = Path(result.stdout.strip())
    assert pulled.name == GGUF_FILE
    assert sha256(pulled) == sha256(served.repos[GGUF_REPO] / GGUF_FILE)
    downloads = [r for r in served.requests if r[0] == "GET" and r[1].endswith(GGUF_FILE)]
    size = pulled.stat().st_size
    # The hub dropped the first download halfway; the second asked for the rest only (from the last
    # whole chunk huggingface_hub had written).
    first, rest = (r[2] for r in downloads)
    assert first is None
    assert rest is not None
    assert 0 < int(rest.removeprefix("bytes=").rstrip("-")) <= size // 2
    assert "README.md" not in "".join(r[1] for r in served.requests if "resolve" in r[1])

    asked = len(served.requests)
    offline = modelport_cli({**hf_env, "HF_HUB_OFFLINE": "1"}, "pull", GGUF_REPO)
    assert offline.returncode == 0, offline.stderr
    assert Path(offline.stdout.strip()) == pulled
    assert len(served.requests) == asked  # from the cache: the hub was not asked


def test_pull_of_a_repository_that_does_not_exist_is_one_clear_line(hf_env: dict[str, str]) -> None:
    result = modelport_cli(hf_env, "pull", "nobody/nothing-GGUF")
    assert result.returncode == 1
    assert "no model `nobody/nothing-GGUF` on the Hub" in result.stderr
    assert "Traceback" not in result.stderr
    missing = modelport_cli(hf_env, "pull", f"{GGUF_REPO}:Q8_0")
    assert missing.returncode == 1
    assert "no Q8_0 file in the repository; its quantisations: Q4_1" in missing.stderr


def test_serve_hf_references_pulls_them_and_serves_them(hf_env: dict[str, str]) -> None:
    live = LiveServer("--no-defaults", f"hf://{GGUF_REPO}", f"hf://{WHISPER_REPO}", env=hf_env)
    try:
        live.wait_ready()
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list()] == [
            "smollm2-135m-instruct-q4_1",
            "faster-whisper-tiny.en",
        ]
        answer = client.chat.completions.create(
            model="smollm2-135m-instruct-q4_1", messages=[{"role": "user", "content": "Hi"}], max_tokens=5
        )
        assert answer.choices[0].message.content
        with modelport.OpenAI() as speaker:
            audio = speaker.audio.speech.create(model="tts-1", voice="alloy", input="Good morning.")
        text = client.audio.transcriptions.create(
            model="faster-whisper-tiny.en", file=("hi.wav", audio.content), response_format="text"
        )
        assert "morning" in text.lower()
    finally:
        live.stop()


def test_models_toml_takes_hf_references_pulled_on_first_use(
    hf_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in hf_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", hf_env["HF_ENDPOINT"])
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(Path(hf_env["HF_HOME"]) / "hub"))
    settings = Settings.model_validate(
        {
            "defaults": False,
            "models": [{"id": "tiny", "engine": "llamacpp", "path": f"hf://{GGUF_REPO}/{GGUF_FILE}"}],
        }
    )
    with modelport.OpenAI(settings=settings) as client:
        answer = client.completions.create(model="tiny", prompt="The capital of France is", max_tokens=3)
    assert answer.choices[0].text

    missing = Settings.model_validate(
        {
            "defaults": False,
            "models": [{"id": "gone", "engine": "llamacpp", "path": "hf://nobody/nothing-GGUF"}],
        }
    )
    with modelport.OpenAI(settings=missing) as client, pytest.raises(openai.InternalServerError) as caught:
        client.completions.create(model="gone", prompt="Hi", max_tokens=1)
    assert "The model `gone` failed to load: HubError: no model `nobody/nothing-GGUF` on the Hub" in str(
        caught.value
    )


def test_the_cache_is_listed_and_removed(hf_env: dict[str, str]) -> None:
    listed = modelport_cli(hf_env, "models", "--local")
    assert listed.returncode == 0, listed.stderr
    lines = {line.split("\t")[0]: line.split("\t")[1] for line in listed.stdout.splitlines()}
    assert lines[GGUF_REPO] == "94 MiB"
    assert WHISPER_REPO in lines
    removed = modelport_cli(hf_env, "rm", GGUF_REPO)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.startswith(f"removed {GGUF_REPO} (94 MiB freed)")
    assert GGUF_REPO not in modelport_cli(hf_env, "models", "--local").stdout
    again = modelport_cli(hf_env, "rm", GGUF_REPO)
    assert again.returncode == 1
    assert "is not in the cache" in again.stderr


def test_a_reference_names_a_repository_a_revision_a_file_and_a_quantisation() -> None:
    ref = hub.parse("hf://Qwen/Qwen2.5-0.5B-Instruct-GGUF@main/qwen2.5-0.5b-instruct-q8_0.gguf")
    assert ref == hub.Reference("Qwen/Qwen2.5-0.5B-Instruct-GGUF", "main", "qwen2.5-0.5b-instruct-q8_0.gguf")
    assert hub.parse("Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q8_0").quant == "Q8_0"
    with pytest.raises(hub.HubError, match="not a Hugging Face reference"):
        hub.parse("hf://just-a-name")


def test_the_quantisation_chosen_is_q4_k_m_else_the_smallest_of_four_bits_or_more() -> None:
    files = {"m-Q8_0.gguf": 8, "m-Q4_K_M.gguf": 5, "m-Q2_K.gguf": 3, "mmproj-m-f16.gguf": 1}
    assert hub.choose(files) == ["m-Q4_K_M.gguf"]
    del files["m-Q4_K_M.gguf"]
    assert hub.choose(files) == ["m-Q8_0.gguf"]  # Q2_K is smaller but below 4 bits
    files |= {"m-IQ4_XS.gguf": 4, "m-F16-00001-of-00002.gguf": 8, "m-F16-00002-of-00002.gguf": 8}
    assert hub.choose(files) == ["m-IQ4_XS.gguf"]
    assert hub.choose(files, "f16") == ["m-F16-00001-of-00002.gguf", "m-F16-00002-of-00002.gguf"]
    with pytest.raises(hub.HubError, match="no Q5_K_M file in the repository"):
        hub.choose(files, "Q5_K_M")


def test_a_pulled_model_gets_the_projector_its_repository_has(hf_env: dict[str, str]) -> None:
    shown = subprocess.run(
        [sys.executable, "-c", "from modelport.cli import parser, settings_of; "
         f"s = settings_of(parser().parse_args(['models', '--no-defaults', 'hf://{VISION_REPO}'])); "
         "print(s.models[-1].options['mmproj'])"],
        capture_output=True, text=True, timeout=120, env={**os.environ, **hf_env},
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert Path(shown.stdout.strip()).name == "mmproj-SmolLM2-135M-f16.gguf"  # the 16-bit one of the two
    assert Path(shown.stdout.strip()).is_file()


def test_the_projector_chosen_is_the_16_bit_one_else_the_smallest() -> None:
    assert hub.projector_of({"m-Q4_K_M.gguf": 9}) is None
    assert (
        hub.projector_of({"m.gguf": 9, "mmproj-m-f16.gguf": 5, "mmproj-m-Q8_0.gguf": 3})
        == "mmproj-m-f16.gguf"
    )
    assert hub.projector_of({"m.gguf": 9, "mmproj-a.gguf": 5, "mmproj-b.gguf": 3}) == "mmproj-b.gguf"
