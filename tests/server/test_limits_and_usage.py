"""Limits per project and per key (requests and tokens per minute, allowed models), answered with
OpenAI's 429 and `x-ratelimit-*` headers that the SDK's backoff follows; and usage per project, read back
through the Usage API and `modelport usage`, equal to what the answers said they used."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import ollama
import openai
import pytest

from modelport.predictors.registry import ModelRegistry
from modelport.server import create_app
from modelport.service import Service
from modelport.settings import AuthSettings, Limits, ModelConfig
from tests.predictors.tiny_models import loudness_transcriber, reverse_chat
from tests.server.test_projects import cli, made_key, new_key
from tests.support.configs import tiny_settings
from tests.support.faces import Faces, faces
from tests.support.live import serve_app, wait_healthy
from tests.support.wav import wav


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Faces, str]]:
    database = str(tmp_path_factory.mktemp("limits") / "state.db")
    cli("projects", "create", "ops", "--database", database)
    settings = tiny_settings(database)
    settings.auth = AuthSettings(key_cache_seconds=0.5, usage_flush_seconds=0.2)
    with faces(settings) as served:
        yield served, database


def client_of(limited: tuple[Faces, str], project: str, *limits: str, retries: int = 0) -> openai.OpenAI:
    """A key of a new project with these limits (`--rpm 30`, ...)."""
    served, database = limited
    cli("projects", "create", project, *limits, "--database", database)
    _, key = made_key(database, project)
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=retries, timeout=60)


def ask(client: openai.OpenAI, text: str = "one two", model: str = "reverse") -> Any:
    return client.chat.completions.with_raw_response.create(
        model=model, messages=[{"role": "user", "content": text}]
    )


def test_a_burst_over_the_request_limit_is_a_429_with_openais_headers(limited: tuple[Faces, str]) -> None:
    client = client_of(limited, "burst", "--rpm", "30")
    first = ask(client)
    assert first.headers["x-ratelimit-limit-requests"] == "30"
    assert first.headers["x-ratelimit-remaining-requests"] == "29"
    assert first.headers["x-ratelimit-reset-requests"].endswith("s")
    for _ in range(29):
        ask(client)
    with pytest.raises(openai.RateLimitError) as refused:
        ask(client)
    headers = refused.value.response.headers
    assert headers["x-ratelimit-remaining-requests"] == "0"
    assert 1 <= int(headers["retry-after"]) <= 2  # 30 a minute: one back every two seconds
    # The wait to the millisecond, which the SDKs prefer, and the whole seconds rounded up.
    assert 0 < int(headers["retry-after-ms"]) <= 2000
    assert int(headers["retry-after"]) == -(-int(headers["retry-after-ms"]) // 1000)
    assert refused.value.code == "rate_limit_exceeded"


def test_the_sdks_retry_gets_in_after_retry_after(limited: tuple[Faces, str]) -> None:
    client = client_of(limited, "patient", "--rpm", "60", retries=2)
    for _ in range(60):
        ask(client)
    with pytest.raises(openai.RateLimitError) as refused:
        ask(client.with_options(max_retries=0))
    said = int(refused.value.response.headers["retry-after-ms"]) / 1000  # what the SDK waits, exactly
    started = time.monotonic()
    answer = ask(client).parse()  # refused again, then let in once that wait is over
    assert answer.choices[0].message.content == "two one"
    assert time.monotonic() - started >= said / 2


def test_tokens_per_minute_are_counted_from_what_was_used(limited: tuple[Faces, str]) -> None:
    client = client_of(limited, "wordy", "--tpm", "20")
    used = ask(client, "a b c d e f g h i j").parse().usage  # 10 in, 10 out
    assert used.total_tokens == 20
    with pytest.raises(openai.RateLimitError) as refused:
        ask(client)
    assert refused.value.response.headers["x-ratelimit-limit-tokens"] == "20"
    assert "tokens per minute" in refused.value.message


def test_a_project_uses_only_its_allowed_models_and_per_model_limits(limited: tuple[Faces, str]) -> None:
    client = client_of(limited, "narrow", "--models", "reverse", "--rpm", "reverse=2")
    assert [m.id for m in client.models.list()] == ["reverse"]
    with pytest.raises(openai.NotFoundError):
        client.models.retrieve("recall")
    ask(client)
    with pytest.raises(openai.NotFoundError) as refused:
        ask(client, model="recall")
    assert refused.value.code == "model_not_found"
    ask(client)
    with pytest.raises(openai.RateLimitError):
        ask(client)


def test_a_keys_own_limit_applies_within_its_project(limited: tuple[Faces, str]) -> None:
    served, database = limited
    cli("projects", "create", "roomy", "--database", database)
    _, tight = made_key(database, "roomy", "--rpm", "2")
    _, free = made_key(database, "roomy")
    tight_client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=tight, max_retries=0)
    free_client = openai.OpenAI(base_url=f"{served.url}/v1", api_key=free, max_retries=0)
    ask(tight_client)
    ask(tight_client)
    with pytest.raises(openai.RateLimitError):
        ask(tight_client)
    ask(free_client)


def test_usage_totals_equal_the_answers_usage(limited: tuple[Faces, str]) -> None:
    served, database = limited
    start = int(time.time()) // 60 * 60
    client = client_of(limited, "metered")
    project = cli("projects", "list", "--database", database).split("metered")[0].split()[-1]
    used = [ask(client, "one two three" * n).parse().usage for n in range(1, 4)]
    streamed = client.chat.completions.create(
        model="reverse",
        messages=[{"role": "user", "content": "four five"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    used += [chunk.usage for chunk in streamed if chunk.usage]
    response = client.responses.create(model="reverse", input="six seven eight")
    _, admin_key = made_key(database, "ops", "--admin")
    admin = openai.OpenAI(base_url=f"{served.url}/v1", api_key=admin_key, max_retries=0)
    page: Any = admin.get(
        "/organization/usage/completions",
        options={"params": {"start_time": start, "group_by": ["project_id", "model"], "bucket_width": "1m"}},
        cast_to=object,
    )
    results = [r for bucket in page["data"] for r in bucket["results"] if r["project_id"] == project]
    assert {r["model"] for r in results} == {"reverse"}
    assert sum(r["num_model_requests"] for r in results) == 5
    assert sum(r["input_tokens"] for r in results) == sum(u.prompt_tokens for u in used) + (
        response.usage.input_tokens if response.usage else 0
    )
    assert sum(r["output_tokens"] for r in results) == sum(u.completion_tokens for u in used) + (
        response.usage.output_tokens if response.usage else 0
    )
    printed = cli("usage", "--project", "metered", "--database", database)
    row = next(line for line in printed.splitlines() if line.startswith(project))
    assert row.split()[1:4] == ["reverse", "completions", "5"]


def test_anthropic_s_and_ollama_s_faces_are_admitted_and_metered_as_openai_s(
    limited: tuple[Faces, str],
) -> None:
    import anthropic  # here, not at the top: 1.5 s of imports on every worker that collects this file

    served, database = limited
    start = int(time.time()) // 60 * 60
    cli("projects", "create", "faces", "--models", "reverse", "--rpm", "3", "--database", database)
    _, key = made_key(database, "faces")
    claude = anthropic.Anthropic(base_url=served.url, api_key=key, max_retries=0)
    local = ollama.Client(host=served.url, headers={"Authorization": f"Bearer {key}"})
    said = [{"role": "user", "content": "one two three"}]
    message = claude.messages.create(model="reverse", max_tokens=10, messages=said)  # type: ignore[arg-type]
    chatted = local.chat(model="reverse", messages=said, stream=False)
    with pytest.raises(anthropic.NotFoundError):  # a model the project may not use, as on OpenAI's face
        claude.messages.create(model="recall", max_tokens=10, messages=said)  # type: ignore[arg-type]
    with pytest.raises(ollama.ResponseError) as refused:
        local.chat(model="recall", messages=said, stream=False)
    assert refused.value.status_code == 404
    generated = local.generate(model="reverse", prompt="four five", stream=False)
    with pytest.raises(ollama.ResponseError) as limited_rate:  # the project's 3 requests a minute, spent
        local.generate(model="reverse", prompt="six", stream=False)
    assert limited_rate.value.status_code == 429
    _, admin_key = made_key(database, "ops", "--admin")
    admin = openai.OpenAI(base_url=f"{served.url}/v1", api_key=admin_key, max_retries=0)
    project = cli("projects", "list", "--database", database).split("faces")[0].split()[-1]
    for _ in range(50):  # usage is written every `usage_flush_seconds`
        page: Any = admin.get(
            "/organization/usage/completions",
            options={"params": {"start_time": start, "group_by": ["project_id"], "bucket_width": "1m"}},
            cast_to=object,
        )
        results = [r for bucket in page["data"] for r in bucket["results"] if r["project_id"] == project]
        if sum(r["num_model_requests"] for r in results) >= 3:
            break
        time.sleep(0.1)
    assert sum(r["num_model_requests"] for r in results) == 3
    made = message.usage.output_tokens + (chatted.eval_count or 0) + (generated.eval_count or 0)
    assert sum(r["output_tokens"] for r in results) == made


def test_an_answer_with_no_bound_of_its_own_gets_the_operator_s_default_length(tmp_path: Path) -> None:
    settings = tiny_settings(str(tmp_path / "state.db"))
    settings.limits = Limits(max_output_tokens=2)
    with faces(settings) as served:
        for client in (served.http, served.inprocess):
            unbounded = client.chat.completions.create(
                model="reverse", messages=[{"role": "user", "content": "one two three four"}]
            )
            assert unbounded.choices[0].message.content == "four three"  # two tokens, the default
            asked = client.chat.completions.create(
                model="reverse", messages=[{"role": "user", "content": "one two three four"}], max_tokens=3
            )
            assert asked.choices[0].message.content == "four three two"  # a request may ask for more


def test_a_model_served_elsewhere_is_metered_as_one_served_here(tmp_path: Path) -> None:
    """A remote model's answers count against the caller's project as a local one's: a stream whose client
    asked for no usage (the SDK's default), and the seconds of a transcript, whole and streamed."""
    start = int(time.time()) // 60 * 60
    registry = ModelRegistry()
    registry.add_predictor("reverse", reverse_chat)
    registry.add_predictor("loudness", loudness_transcriber)
    database = str(tmp_path / "state.db")
    cli("projects", "create", "ops", "--database", database)
    cli("projects", "create", "far", "--database", database)
    with serve_app(create_app(service=Service(registry))) as upstream:
        wait_healthy(upstream)
        far = {"engine": "remote", "upstreams": [f"{upstream}/v1"]}
        settings = tiny_settings(database)
        settings.auth = AuthSettings(usage_flush_seconds=0.2)
        settings.models = [
            ModelConfig.model_validate({**far, "id": "far-chat", "upstream_model": "reverse"}),
            ModelConfig.model_validate(
                {**far, "id": "far-ears", "upstream_model": "loudness", "capabilities": ["transcription"]}
            ),
        ]
        with faces(settings) as served:
            client = openai.OpenAI(
                base_url=f"{served.url}/v1", api_key=new_key(database, "far"), max_retries=0
            )
            streamed = client.chat.completions.create(
                model="far-chat", messages=[{"role": "user", "content": "a b c d"}], stream=True
            )
            assert [chunk.usage for chunk in streamed] == [None] * 6  # none asked for, none sent
            heard = client.audio.transcriptions.create(model="far-ears", file=("tone.wav", _tone(1.5)))
            assert heard.text == "1.5 seconds of sound"
            for _ in client.audio.transcriptions.create(
                model="far-ears", file=("tone.wav", _tone(2.5)), stream=True
            ):
                pass
            admin = openai.OpenAI(
                base_url=f"{served.url}/v1", api_key=new_key(database, "ops", "--admin"), max_retries=0
            )
            project = cli("projects", "list", "--database", database).split("far")[0].split()[-1]

            def used(kind: str, count: str) -> float:
                asked = {"start_time": start, "bucket_width": "1m", "project_ids": [project]}
                page: Any = admin.get(
                    f"/organization/usage/{kind}", options={"params": asked}, cast_to=object
                )
                return sum(r[count] for bucket in page["data"] for r in bucket["results"])

            for _ in range(50):  # usage is written every `usage_flush_seconds`
                if used("audio_transcriptions", "num_model_requests") >= 2:
                    break
                time.sleep(0.1)
            assert used("completions", "output_tokens") == 4
            assert used("completions", "input_tokens") == 4
            assert used("audio_transcriptions", "seconds") == 2 + 3  # each answer's, in whole seconds


def _tone(seconds: float) -> bytes:
    """A WAV of a loud tone, 8 kHz."""
    samples = (0.5 * np.sin(np.arange(int(8000 * seconds)) * 0.3) * 32767).astype("<i2")
    return wav(samples.tobytes(), 8000)
