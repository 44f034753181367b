"""Reasoning sealed for a stateless client (`include: ["reasoning.encrypted_content"]`, as the Agents SDK and
Codex send with `store: false`): a reasoning item carries its thinking encrypted and authenticated with a key
of this server's, and the client gives it back in the next turn's input, where it is opened again. Another
server's blob, or one altered on the way, does not open: a 400 naming the item.

The keys live in the data folder (`reasoning-keys.json`, readable by its owner only), newest first; a blob
is sealed with the newest and opened with any of them, so `modelport reasoning-key rotate` adds a key
without making the blobs of conversations in flight unreadable (the oldest beyond `KEPT` are dropped).
Fernet (AES-128 in CBC mode with an HMAC-SHA256 over it, from `cryptography`, imported by the first blob
sealed or opened) does the sealing.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from modelport.errors import InvalidRequestError

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

KEPT = 3  # keys that still open blobs: the newest and two before it
FILE = "reasoning-keys.json"


class Sealer:
    """Seals and opens reasoning with this server's keys (made on first use)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / FILE
        self._keys: MultiFernet | None = None
        self._lock = threading.Lock()

    def seal(self, text: str) -> str:
        """`text` encrypted and authenticated, as URL-safe text."""
        return self._fernet().encrypt(json.dumps({"reasoning": text}).encode()).decode()

    def open(self, blob: str, param: str) -> str:
        """The reasoning a blob of this server's holds; a 400 naming `param` for any other blob."""
        from cryptography.fernet import InvalidToken

        try:
            opened = json.loads(self._fernet().decrypt(blob.encode()))
            return str(opened["reasoning"])
        except (InvalidToken, ValueError, KeyError, TypeError):
            raise InvalidRequestError(
                f"{param} was not sealed by this server, or was changed since: it cannot be opened. "
                "Give back the reasoning items this server returned, as they were.",
                param=param,
                code="invalid_encrypted_content",
            ) from None

    def rotate(self) -> int:
        """Make a new key the one that seals; returns how many keys open blobs now."""
        from cryptography.fernet import Fernet

        with self._lock:
            keys = [Fernet.generate_key().decode(), *self._read()][:KEPT]
            self._write(keys)
            self._keys = None
            return len(keys)

    def _fernet(self) -> MultiFernet:
        from cryptography.fernet import Fernet, MultiFernet

        with self._lock:
            if self._keys is None:
                keys = self._read() or self._first()
                self._keys = MultiFernet([Fernet(key.encode()) for key in keys])
            return self._keys

    def _first(self) -> list[str]:
        """The first key, made once however many servers share the folder: the one whose file is made
        first is everyone's."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            descriptor = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return self._read()
        from cryptography.fernet import Fernet

        keys = [Fernet.generate_key().decode()]
        with os.fdopen(descriptor, "w") as file:
            json.dump({"keys": keys}, file)
        return keys

    def _read(self) -> list[str]:
        for _ in range(100):  # another server may be writing the first key this moment
            try:
                return [str(key) for key in json.loads(self.path.read_text())["keys"]]
            except FileNotFoundError:
                return []
            except ValueError:
                time.sleep(0.01)
        raise InvalidRequestError(f"{self.path} holds no reasoning keys; remove it to make new ones.")

    def _write(self, keys: list[str]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fresh = self.path.with_suffix(".tmp")
        descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as file:
            json.dump({"keys": keys}, file)
        os.replace(fresh, self.path)  # one step: a server reading it sees the old keys or the new
