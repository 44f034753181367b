"""Both faces of one service: its HTTP server (uvicorn, in a thread of this process, on 127.0.0.1) and its
in-process client, sharing one event loop and so one set of loaded models. Tests of API behaviour run over
both without starting a process or loading a model twice."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import openai

import modelport
from modelport.server import create_app
from modelport.service import Service
from modelport.settings import Settings
from tests.support.live import serve_app, wait_healthy


class Faces:
    """A service on a configuration, served over HTTP (`url`, `http`: the openai SDK pointed at it) and
    in-process (`inprocess`: `modelport.OpenAI` over the same service)."""

    def __init__(self, service: Service, url: str, api_key: str = "unused") -> None:
        self.service = service
        self.url = url
        self.app: Any = None  # the HTTP app serving it, once `faces` has made it
        self.http = openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, timeout=120)
        self.inprocess = modelport.OpenAI(service=service)

    @property
    def pid(self) -> int:
        """The process that serves it: this one."""
        return os.getpid()

    def face(self, name: str) -> openai.OpenAI:
        """`http` or `in-process`."""
        return self.http if name == "http" else self.inprocess  # type: ignore[return-value]


@contextmanager
def faces(settings: Settings, api_key: str = "unused") -> Iterator[Faces]:
    """Both faces of a service on `settings`, ready (its models loaded, when the settings preload them)."""
    service = Service.from_settings(settings)
    with ExitStack() as stack:
        app = create_app(service=service)
        url = stack.enter_context(serve_app(app))
        wait_healthy(url)
        served = Faces(service, url, api_key)
        served.app = app
        stack.callback(served.inprocess.close)
        yield served
