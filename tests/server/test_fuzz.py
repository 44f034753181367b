"""schemathesis, generating requests from the server's own OpenAPI schema: whatever it sends, the answer is
never a 5xx, and every answer matches the schema's documented status codes and content types. Bounded: a
few examples per operation, small generations (`max_tokens` is capped by the fuzzing server's limits)."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from modelport.settings import Settings
from tests.support.faces import faces

pytestmark = pytest.mark.slow  # hundreds of generated requests

EXAMPLES = int(os.environ.get("MODELPORT_FUZZ_EXAMPLES", "25"))  # per operation; more for a deeper run

CONFIG = """
[limits]
max_tokens = 8
n = 2
embedding_inputs = 16
input_chars = 2000
audio_seconds = 30
"""


@pytest.fixture(scope="module")
def api_schema() -> Iterator[schemathesis.BaseSchema]:
    with faces(Settings.model_validate(tomllib.loads(CONFIG))) as served:
        yield schemathesis.openapi.from_url(f"{served.url}/openapi.json")


# Random model names only ever reach the 404: most generated requests name a served model instead.
MODELS = {
    "/v1/chat/completions": "gpt-4o-mini",
    "/v1/completions": "gpt-3.5-turbo-instruct",
    "/v1/embeddings": "text-embedding-3-small",
    "/v1/audio/speech": "tts-1",
    "/v1/audio/transcriptions": "whisper-1",
    "/v1/audio/translations": "whisper-base",
    "/v1/messages": "claude-sonnet-4-6",
    "/v1/messages/count_tokens": "claude-haiku-4-5",
    "/api/chat": "smollm2-135m-instruct",
    "/api/generate": "smollm2-135m-instruct",
    "/api/embed": "all-minilm-l6-v2",
    "/api/embeddings": "all-minilm-l6-v2",
}


def with_a_real_model(case: schemathesis.Case) -> schemathesis.Case:
    model = MODELS.get(case.operation.path)
    if model and isinstance(case.body, dict) and hash(repr(case.body)) % 5:
        case.body["model"] = model
    return case


def test_no_generated_request_breaks_the_server(api_schema: schemathesis.BaseSchema) -> None:
    # Driven through hypothesis directly: schemathesis' pytest plugin does not load on this pytest.
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 10  # the schema describes the real endpoints
    statuses: dict[int, int] = {}
    for operation in operations:

        @given(case=operation.as_strategy().map(with_a_real_model))
        @settings(
            max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None
        )
        def fuzz(case: schemathesis.Case) -> None:
            response = case.call_and_validate(checks=[not_a_server_error], timeout=120)
            statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

        fuzz()
    print(f"schemathesis: {sum(statuses.values())} requests over {len(operations)} operations: {statuses}")
