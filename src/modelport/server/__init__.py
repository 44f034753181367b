"""The HTTP face: a thin FastAPI adapter over the service."""

from modelport.server.app import create_app

__all__ = ["create_app"]
