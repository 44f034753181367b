"""Text to speech with eSpeak NG (libespeak-ng from `espeakng-loader`, driven through ctypes).

Formant synthesis: robotic, but it speaks 100+ languages and is far faster than real time. The library
keeps global state, so one engine per process serves every predictor, one call at a time.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from modelport.engines import Engine
from modelport.predictors.parameter import Parameter

_SYNCHRONOUS = 2  # AUDIO_OUTPUT_SYNCHRONOUS: espeak_Synth returns when the text is spoken
_CHARS_UTF8 = 1
_RATE = 1  # espeakRATE, words per minute
_NORMAL_WPM = 175
_MIN_WPM, _MAX_WPM = 80, 980


class _EspeakVoice(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        # A priority byte, then a NUL-terminated name, repeated; a c_char_p would read only the first byte.
        ("languages", ctypes.c_void_p),
        ("identifier", ctypes.c_char_p),
        ("gender", ctypes.c_ubyte),
        ("age", ctypes.c_ubyte),
        ("variant", ctypes.c_ubyte),
        ("xx1", ctypes.c_ubyte),
        ("score", ctypes.c_int),
        ("spare", ctypes.c_void_p),
    ]


_Callback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_short), ctypes.c_int, ctypes.c_void_p)


class _Espeak:
    """The one libespeak-ng of this process: the library keeps a single synth callback and voice, so every
    predictor loaded from it must share one callback, one buffer and one lock."""

    def __init__(self) -> None:
        try:
            import espeakng_loader
        except ImportError as error:
            raise ImportError(
                f"eSpeak NG is not installed (GPL-3.0): pip install 'modelport[piper]' ({error})"
            ) from None

        self.lib = ctypes.CDLL(str(espeakng_loader.get_library_path()))
        data_parent = str(Path(espeakng_loader.get_data_path()).parent)
        self.sample_rate = self.lib.espeak_Initialize(_SYNCHRONOUS, 0, data_parent.encode(), 0)
        if self.sample_rate <= 0:
            raise RuntimeError(f"espeak-ng failed to initialise (data in {data_parent})")
        self.voices = _voices(self.lib)
        self.lock = threading.Lock()
        self._pieces: list[np.ndarray] = []
        self._collect = _Callback(self._on_samples)  # kept here so the C callback outlives every call
        self.lib.espeak_SetSynthCallback(self._collect)
        self.lib.espeak_Synth.argtypes = [
            ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
            ctypes.c_void_p, ctypes.c_void_p,
        ]  # fmt: skip

    def _on_samples(self, wav: Any, count: int, _events: Any) -> int:
        if count > 0:
            self._pieces.append(np.ctypeslib.as_array(wav, shape=(count,)).astype(np.float32) / 32768.0)
        return 0

    def speak(self, text: str, voice: str, wpm: int) -> np.ndarray:
        data = text.encode()
        with self.lock:
            self._pieces.clear()
            if self.lib.espeak_SetVoiceByName(self.voices[voice]) != 0:
                raise ValueError(f"espeak-ng has no voice `{voice}`")
            self.lib.espeak_SetParameter(_RATE, wpm, 0)
            self.lib.espeak_Synth(data, len(data) + 1, 0, 0, 0, _CHARS_UTF8, None, None)
            self.lib.espeak_Synchronize()
            return np.concatenate(self._pieces) if self._pieces else np.zeros(0, np.float32)


@functools.cache
def _espeak() -> _Espeak:
    return _Espeak()


class EspeakSpeaker:
    """The speech predictor of libespeak-ng: each language is a voice (`Voices`)."""

    def __init__(self, espeak: _Espeak) -> None:
        self._espeak = espeak
        self.voices = tuple(espeak.voices)
        self.sample_rate = espeak.sample_rate

    def __call__(
        self,
        text: str,
        voice: Annotated[str, Parameter.AudioVoice],
        speed: Annotated[
            float, Parameter.AudioSpeed(min=_MIN_WPM / _NORMAL_WPM, max=_MAX_WPM / _NORMAL_WPM)
        ] = 1.0,
    ) -> Annotated[np.ndarray, Parameter.Audio]:
        return self._espeak.speak(text, voice, int(min(max(_NORMAL_WPM * speed, _MIN_WPM), _MAX_WPM)))


def load() -> Sequence[EspeakSpeaker]:
    """Return the speech predictor of libespeak-ng."""
    return [EspeakSpeaker(_espeak())]


ENGINE = Engine(load)


def _voices(lib: ctypes.CDLL) -> dict[str, bytes]:
    """Each voice by its primary language code (en-us, fr-fr, …), English first so it is the default."""
    lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_EspeakVoice))
    listed = lib.espeak_ListVoices(None)
    voices: dict[str, bytes] = {}
    i = 0
    while listed[i]:
        voice = listed[i].contents
        if voice.languages and voice.identifier:
            voices.setdefault(ctypes.string_at(voice.languages + 1).decode(), voice.identifier)
        i += 1
    english = sorted((n for n in voices if n.startswith("en")), key=lambda n: n != "en-us")
    return {n: voices[n] for n in english + sorted(set(voices) - set(english))}
