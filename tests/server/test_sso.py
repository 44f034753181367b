"""Identity from the site's own provider: JWTs signed by a key of a JWKS served on 127.0.0.1, their project
from a claim; what they store is their project's, and every flaw of a token is a 401."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import jwt
import openai
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from modelport.settings import AuthSettings
from tests.server.test_projects import cli
from tests.support.configs import tiny_settings
from tests.support.faces import Faces, faces
from tests.support.live import serve_app

ISSUER, AUDIENCE = "https://sso.example", "modelport"


def public_jwk(private: rsa.RSAPrivateKey, kid: str) -> dict[str, Any]:
    jwk: dict[str, Any] = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    return {**jwk, "kid": kid, "alg": "RS256", "use": "sig"}


@pytest.fixture(scope="module")
def signer() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def sso(tmp_path_factory: pytest.TempPathFactory, signer: rsa.RSAPrivateKey) -> Iterator[Faces]:
    jwks = {"keys": [public_jwk(signer, "k1")]}
    provider = Starlette(routes=[Route("/jwks.json", lambda _: JSONResponse(jwks))])
    database = str(tmp_path_factory.mktemp("sso") / "state.db")
    for name in ("alpha", "beta"):
        cli("projects", "create", name, "--database", database)
    with serve_app(provider) as provider_url:
        settings = tiny_settings(database)
        settings.auth = AuthSettings(
            jwks_url=f"{provider_url}/jwks.json", jwt_issuer=ISSUER, jwt_audience=AUDIENCE
        )
        with faces(settings) as served:
            yield served


def token(key: rsa.RSAPrivateKey, kid: str = "k1", **claims: Any) -> str:
    base = {"iss": ISSUER, "aud": AUDIENCE, "sub": "ada", "project": "alpha", "exp": int(time.time()) + 300}
    return jwt.encode({**base, **claims}, key, algorithm="RS256", headers={"kid": kid})


def client(served: Faces, bearer: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=bearer, max_retries=0, timeout=60)


def test_a_token_from_the_provider_is_its_projects_caller(sso: Faces, signer: rsa.RSAPrivateKey) -> None:
    alpha = client(sso, token(signer))
    beta = client(sso, token(signer, project="beta"))
    made = alpha.chat.completions.create(
        model="reverse", messages=[{"role": "user", "content": "a b"}], store=True
    )
    assert alpha.chat.completions.retrieve(made.id).id == made.id
    with pytest.raises(openai.NotFoundError):
        beta.chat.completions.retrieve(made.id)


@pytest.mark.parametrize(
    "flaw",
    ["expired", "audience", "issuer", "unknown project", "no project", "other signer", "unknown kid", "junk"],
)
def test_a_flawed_token_is_a_401(sso: Faces, signer: rsa.RSAPrivateKey, flaw: str) -> None:
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    bearer = {
        "expired": lambda: token(signer, exp=int(time.time()) - 10),
        "audience": lambda: token(signer, aud="someone-else"),
        "issuer": lambda: token(signer, iss="https://evil.example"),
        "unknown project": lambda: token(signer, project="gamma"),
        "no project": lambda: token(signer, project=""),
        "other signer": lambda: token(other),
        "unknown kid": lambda: token(other, kid="k2"),
        "junk": lambda: "a.b.c",
    }[flaw]()
    with pytest.raises(openai.AuthenticationError):
        client(sso, bearer).models.list()
