"""The answer audio of a session whose transport plays it in real time (a WebRTC call's outgoing track),
rather than handing it to the client as events: queued as the speech model makes it, taken a frame at a
time as the transport sends it, with what each item has played counted, so that an interruption stops
the audio at once and cuts the item where the listener stopped hearing it. Tells the client when audio
starts and stops playing (`output_audio_buffer.started`/`stopped`) and when it was cut (`…cleared`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from openai.types.realtime import RealtimeServerEvent

from modelport.service.audio.codec import OUTPUT_RATE
from modelport.service.realtime.realtime_events import server_event


@dataclass
class _Piece:
    response_id: str
    item_id: str
    pcm: bytes  # 16-bit mono at 24 kHz
    taken: int = 0  # bytes of it played


@dataclass(frozen=True)
class Cut:
    """Where an interruption stopped an item's audio."""

    response_id: str
    item_id: str
    played_ms: int


class Playout:
    """The audio waiting to be played; `notify` sends an event to the client (it must not block)."""

    def __init__(self, notify: Callable[[RealtimeServerEvent], None]) -> None:
        self._notify = notify
        self._pieces: deque[_Piece] = deque()
        self._played: dict[str, int] = {}  # bytes of each item played so far
        self._finished: set[str] = set()  # responses whose audio is all queued
        self._playing: str | None = None  # the response whose audio is playing, once announced
        # The item last played from: when speech synthesis falls behind, the queue runs dry between an
        # answer's clauses while the answer still plays, and an interruption then must still cut that item.
        self._item: str | None = None

    def play(self, response_id: str, item_id: str, pcm: bytes) -> None:
        """Queue a piece of an item's audio (16-bit mono PCM at 24 kHz)."""
        if pcm:
            self._pieces.append(_Piece(response_id, item_id, pcm))

    def finished(self, response_id: str) -> None:
        """All of a response's audio is queued: once it has played, the client is told it stopped."""
        self._finished.add(response_id)
        self._maybe_stopped()

    def take(self, samples: int) -> bytes:
        """The next `samples` of audio to send (silence where there is none)."""
        wanted = samples * 2
        out = bytearray()
        while len(out) < wanted and self._pieces:
            piece = self._pieces[0]
            if self._playing != piece.response_id:
                self._playing = piece.response_id
                self._notify(server_event("output_audio_buffer.started", response_id=piece.response_id))
            self._item = piece.item_id
            chunk = piece.pcm[piece.taken : piece.taken + wanted - len(out)]
            piece.taken += len(chunk)
            self._played[piece.item_id] = self._played.get(piece.item_id, 0) + len(chunk)
            out += chunk
            if piece.taken >= len(piece.pcm):
                self._pieces.popleft()
        self._maybe_stopped()
        return bytes(out) + bytes(wanted - len(out))

    def clear(self) -> Cut | None:
        """Stop what plays and drop what waits; where the item playing was cut, if one was."""
        head = self._pieces[0] if self._pieces else None
        response_id = self._playing or (head.response_id if head else None)
        item_id = self._item if self._playing is not None else head.item_id if head else None
        self._pieces.clear()
        self._playing = None
        if response_id is None:
            return None
        self._finished.discard(response_id)
        self._notify(server_event("output_audio_buffer.cleared", response_id=response_id))
        if item_id is None:
            return None
        return Cut(response_id, item_id, self._played.get(item_id, 0) * 1000 // (2 * OUTPUT_RATE))

    def _maybe_stopped(self) -> None:
        if self._playing is not None and not self._pieces and self._playing in self._finished:
            self._finished.discard(self._playing)
            self._notify(server_event("output_audio_buffer.stopped", response_id=self._playing))
            self._playing = None
