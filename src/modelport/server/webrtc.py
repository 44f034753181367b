"""Realtime sessions over WebRTC (`POST /v1/realtime/calls`), as OpenAI's WebRTC guide and the Agents SDK's
browser transport use them: the client's SDP offer in, an SDP answer out; the user's speech comes as Opus
over RTP and the answer goes back the same way, played in real time from the session's `playout`; the
`oai-events` data channel carries the same events as a WebSocket session (less the audio deltas). aiortc
does ICE, DTLS, SRTP and Opus. Only host candidates are offered (loopback and the machine's interfaces, or
the addresses the operator names), and no STUN or TURN server is contacted unless the operator names one.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import fractions
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import aioice.ice
import av
import numpy as np
from aiortc import (
    MediaStreamTrack,
    RTCConfiguration,
    RTCDataChannel,
    RTCIceServer,
    RTCPeerConnection,
    RTCSessionDescription,
)
from aiortc.mediastreams import MediaStreamError
from openai.types.realtime import RealtimeErrorEvent

from modelport.errors import CapacityError, InvalidRequestError
from modelport.ids import new_id
from modelport.service import Service
from modelport.service.realtime import RealtimeSession
from modelport.service.realtime.playout import Playout
from modelport.service.realtime.realtime_events import Outgoing, wire
from modelport.settings import WebRTCSettings

log = logging.getLogger("modelport.webrtc")

_RATE = 24_000  # what the session hears and speaks: 16-bit mono PCM at 24 kHz
_FRAME = _RATE // 50  # 20 ms, Opus's usual frame
_CHANNEL = "oai-events"


_GATHER = aioice.ice.get_host_addresses  # aioice's own: every interface's addresses but loopback's


def _host_addresses(settings: WebRTCSettings) -> Callable[[bool, bool], list[str]]:
    """The addresses host candidates are gathered on: those the operator names, else every interface's and
    loopback's (aioice leaves loopback out, so a client on the same machine with no other interface, a
    test or a container, could not connect)."""
    gather = _GATHER

    def addresses(use_ipv4: bool, use_ipv6: bool) -> list[str]:
        if settings.addresses:
            return list(settings.addresses)
        found = gather(use_ipv4, use_ipv6)
        return [*found, "127.0.0.1"] if use_ipv4 and "127.0.0.1" not in found else found

    return addresses


class SpokenTrack(MediaStreamTrack):
    """The outgoing audio: 20 ms frames at real-time pace, the session's answer audio or silence."""

    kind = "audio"

    def __init__(self, playout: Playout) -> None:
        super().__init__()
        self.playout = playout
        self._start: float | None = None
        self._sent = 0  # samples

    async def recv(self) -> av.AudioFrame:
        if self.readyState != "live":
            raise MediaStreamError
        if self._start is None:
            self._start = time.monotonic()
        else:
            await asyncio.sleep(max(0.0, self._start + self._sent / _RATE - time.monotonic()))
        samples = np.frombuffer(self.playout.take(_FRAME), "<i2")
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = _RATE
        frame.pts = self._sent
        frame.time_base = fractions.Fraction(1, _RATE)
        self._sent += _FRAME
        return frame


@dataclass
class Call:
    """One call: its peer connection, its session, and the tasks that carry audio and events."""

    id: str
    project: str
    peer: RTCPeerConnection
    session: RealtimeSession | None = None
    channel: RTCDataChannel | None = None
    waiting: list[str] = field(default_factory=list)  # events made before the data channel opened
    tasks: set[asyncio.Task[Any]] = field(default_factory=set)
    opened: asyncio.Event = field(default_factory=asyncio.Event)  # the session is open
    connected: asyncio.Event = field(default_factory=asyncio.Event)  # the client's media reached us
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    # The request that made the call (its caller's project, key and limits): the call's work outlives it,
    # and what the session asks of the models is admitted and counted as that caller's.
    scope: contextvars.Context = field(default_factory=contextvars.copy_context)
    on_end: Callable[[], object] | None = None  # the registry forgets the call

    async def send(self, event: Outgoing) -> None:
        text = wire(event)
        if self.channel is not None and self.channel.readyState == "open":
            self.channel.send(text)
        elif not self.ended.is_set():
            self.waiting.append(text)

    async def started(self) -> RealtimeSession:
        """The session, once it is open."""
        await self.opened.wait()
        assert self.session is not None
        return self.session

    def spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.get_running_loop().create_task(_awaited(work), context=self.scope.copy())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def end(self, last: RealtimeErrorEvent | None = None) -> None:
        """Hang up (after `last`, an error event saying why, if given)."""
        if self.ended.is_set():
            return
        if last is not None:
            with contextlib.suppress(Exception):  # the channel may be gone already
                await self.send(last)
                await asyncio.sleep(0.05)  # let it leave before the transport closes
        self.ended.set()
        if self.on_end is not None:
            self.on_end()
        if self.session is not None:
            await self.session.close()
        current = asyncio.current_task()
        for task in list(self.tasks):
            if task is not current:
                task.cancel()
        await self.peer.close()


class Calls:
    """Opens calls: each one's peer connection, wired to its session, is kept in the service's book of calls
    in progress (`service.realtime.calls`), where the hang-up operation finds it."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.settings = service.settings.webrtc
        self.held = service.realtime.calls
        # aioice has no option for which addresses it gathers on.
        aioice.ice.get_host_addresses = _host_addresses(self.settings)  # type: ignore[assignment]

    async def open(
        self,
        offer: str,
        project: str,
        model: str | None,
        given: dict[str, Any] | None,
        watch: Callable[
            [RealtimeSession, Callable[[RealtimeErrorEvent | None], Awaitable[None]]], Awaitable[None]
        ],
    ) -> tuple[Call, str]:
        """A new call answering the SDP `offer`: the call, and the SDP answer. `watch` ends it at its
        session's limits."""
        if len(self.held) >= self.settings.max_calls:
            raise CapacityError(
                f"This server holds {self.settings.max_calls} WebRTC calls at most ([webrtc] max_calls); "
                "try again when one has ended."
            )
        if "m=audio" not in offer:
            raise InvalidRequestError(
                "The SDP offer has no audio section: add an audio transceiver (or the microphone's track) "
                "before making the offer.",
                param="sdp",
            )
        servers = [RTCIceServer(url) for url in self.settings.ice_servers]
        peer = RTCPeerConnection(RTCConfiguration(iceServers=servers))  # [], not None: no default STUN
        call = Call(new_id("rtc", "_"), project, peer)
        # Counted as it is checked, with no await between: offers sent together cannot all pass the check.
        self.held.add(call)
        call.on_end = partial(self.held.forget, call.id)
        self._wire(call)
        try:
            await peer.setRemoteDescription(RTCSessionDescription(offer, "offer"))
        except Exception as error:  # aiortc reads the client's SDP: what it raises is the offer's fault
            await call.end()
            raise InvalidRequestError(f"The SDP offer could not be read: {error!r}.", param="sdp") from None
        try:
            session = await self.service.realtime.open(model, None, call.send, False, given, media=True)
        except BaseException:
            await call.end()
            raise
        call.session = session
        call.opened.set()
        assert session.playout is not None
        peer.addTrack(SpokenTrack(session.playout))  # on the audio transceiver the offer made
        try:
            await peer.setLocalDescription(await peer.createAnswer())
        except Exception as error:  # an offer aiortc reads but cannot answer (no codec in common, …)
            await call.end()
            message = f"The SDP offer could not be answered: {error!r}."
            raise InvalidRequestError(message, param="sdp") from None
        call.spawn(watch(session, call.end))
        call.spawn(self._connected_in_time(call))
        return call, peer.localDescription.sdp

    async def _connected_in_time(self, call: Call) -> None:
        """End a call whose client does not connect within `connect_seconds` of the answer (it never sent
        its candidates, or they fail): aioice would hold it for a minute or more."""
        try:
            await asyncio.wait_for(call.connected.wait(), self.settings.connect_seconds)
        except TimeoutError:
            log.info("call %s: no connection in %g s; ended", call.id, self.settings.connect_seconds)
            await call.end()

    def _wire(self, call: Call) -> None:
        """The peer's events, wired before the offer is read (its tracks are announced while it is); what
        they carry waits for the session."""
        peer = call.peer

        @peer.on("datachannel")
        def on_channel(channel: RTCDataChannel) -> None:
            if channel.label != _CHANNEL:
                return
            call.channel = channel
            messages: asyncio.Queue[str | bytes] = asyncio.Queue()
            channel.on("message", messages.put_nowait)

            async def flush() -> None:
                await call.opened.wait()
                waiting, call.waiting = call.waiting, []
                for text in waiting:
                    channel.send(text)

            async def serve() -> None:
                session = await call.started()
                while True:  # in order, one at a time, as over a WebSocket
                    await session.receive(await messages.get())

            channel.on("open", lambda: call.spawn(flush()))
            if channel.readyState == "open":
                call.spawn(flush())
            call.spawn(serve())

        @peer.on("track")
        def on_track(track: MediaStreamTrack) -> None:
            if track.kind == "audio":
                call.spawn(_listen(track, call))

        @peer.on("connectionstatechange")
        async def on_state() -> None:
            if peer.connectionState == "connected":
                call.connected.set()
            if peer.connectionState in ("failed", "closed"):
                await call.end()


async def _awaited(work: Awaitable[None]) -> None:
    await work


async def _listen(track: MediaStreamTrack, call: Call) -> None:
    """The user's audio, decoded from Opus, as 16-bit mono at 24 kHz into the session."""
    session = await call.started()
    resampler = av.AudioResampler(format="s16", layout="mono", rate=_RATE)
    while True:
        try:
            frame = await track.recv()
        except MediaStreamError:
            return
        assert isinstance(frame, av.AudioFrame)
        pieces = [f.to_ndarray().reshape(-1) for f in resampler.resample(frame)]
        if pieces:
            await session.input_audio.hear(np.concatenate(pieces))
