"""Local files named by `file://` URLs in content parts, which only the in-process client takes: the caller
and the service share a machine and a user, so a path is read here and sent on as a data URL. The server
never reads a path a client names (its fetcher refuses `file:`)."""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import anyio

from modelport.errors import InvalidRequestError


async def inlined(params: dict[str, Any], key: str, limit: int) -> dict[str, Any]:
    """`params` with each `file://` URL in the content parts of `params[key]` (chat `messages`, Responses
    `input`) read into a data URL; a file over `limit` bytes, or one that cannot be read, is a 400."""
    items = params.get(key)
    if not isinstance(items, list):
        return params
    out = []
    for i, item in enumerate(items):
        if isinstance(item, dict) and isinstance(item.get("content"), list):
            parts = item["content"]
            item = {
                **item,
                "content": [await _part(p, f"{key}[{i}].content[{j}]", limit) for j, p in enumerate(parts)],
            }
        out.append(item)
    return {**params, key: out}


async def _part(part: Any, where: str, limit: int) -> Any:
    if not isinstance(part, dict):
        return part
    kind = part.get("type")
    if kind == "image_url":  # chat: {"image_url": {"url": …, "detail": …}}
        image = part.get("image_url")
        image = image if isinstance(image, dict) else {"url": image}
        if _local(image.get("url")):
            return {
                **part,
                "image_url": {**image, "url": await _data_url(image["url"], f"{where}.image_url.url", limit)},
            }
    elif kind == "input_image" and _local(part.get("image_url")):
        return {**part, "image_url": await _data_url(part["image_url"], f"{where}.image_url", limit)}
    elif kind == "input_file" and _local(part.get("file_url")):
        return await _file(part, f"{where}.file_url", limit)
    elif kind == "file" and isinstance(part.get("file"), dict) and _local(part["file"].get("file_url")):
        return {**part, "file": await _file(part["file"], f"{where}.file.file_url", limit)}
    return part


async def _file(holder: dict[str, Any], param: str, limit: int) -> dict[str, Any]:
    """A file part's `file_url` as its `file_data`, named by the file's name unless it has one."""
    rest = {k: v for k, v in holder.items() if k != "file_url"}
    name = Path(unquote(urlparse(holder["file_url"]).path)).name
    return {
        **rest,
        "file_data": await _data_url(holder["file_url"], param, limit),
        "filename": holder.get("filename") or name,
    }


def _local(url: Any) -> bool:
    return isinstance(url, str) and url.startswith("file:")


async def _data_url(url: str, param: str, limit: int) -> str:
    parsed = urlparse(url)
    if parsed.netloc not in ("", "localhost"):
        raise InvalidRequestError(
            f"{param}: a file URL names a file on this machine, not on {parsed.netloc}.", param=param
        )
    path = Path(unquote(parsed.path))
    data = await anyio.to_thread.run_sync(_read, path, limit, param)
    media = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{media};base64,{base64.b64encode(data).decode()}"


def _read(path: Path, limit: int, param: str) -> bytes:
    try:
        if path.stat().st_size > limit:
            raise InvalidRequestError(f"{param}: {path} is larger than {limit} bytes.", param=param)
        return path.read_bytes()
    except OSError as error:
        raise InvalidRequestError(
            f"{param}: {path} cannot be read ({error.strerror}).", param=param
        ) from None
