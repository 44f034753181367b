"""Text to speech with eSpeak NG (libespeak-ng from `espeakng-loader`, driven through ctypes).

Formant synthesis: robotic, but it speaks 100+ languages and is far faster than real time. The library
keeps global state, so calls are serialised with a lock.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np

from modelport.predictors.parameter import Parameter

_SYNCHRONOUS = 2  # AUDIO_OUTPUT_SYNCHRONOUS: espeak_Synth returns when the text is spoken
_CHARS_UTF8 = 1
_RATE = 1  # espeakRATE, words per minute
_NORMAL_WPM = 175
_MIN_WPM, _MAX_WPM = 80, 980


class _Voice(ctypes.Structure):
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


def load() -> Sequence[Callable[..., Any]]:
    """Initialise libespeak-ng and return its speech predictor; each language is a voice."""
    import espeakng_loader

    lib = ctypes.CDLL(str(espeakng_loader.get_library_path()))
    data_parent = str(Path(espeakng_loader.get_data_path()).parent)
    sample_rate = lib.espeak_Initialize(_SYNCHRONOUS, 0, data_parent.encode(), 0)
    if sample_rate <= 0:
        raise RuntimeError(f"espeak-ng failed to initialise (data in {data_parent})")
    voices = _voices(lib)
    lock = threading.Lock()
    pieces: list[np.ndarray] = []

    def on_samples(wav: Any, count: int, _events: Any) -> int:
        if count > 0:
            pieces.append(np.ctypeslib.as_array(wav, shape=(count,)).astype(np.float32) / 32768.0)
        return 0

    collect = _Callback(on_samples)

    lib.espeak_SetSynthCallback(collect)
    lib.espeak_Synth.argtypes = [
        ctypes.c_char_p, ctypes.c_size_t, ctypes.c_uint, ctypes.c_int, ctypes.c_uint, ctypes.c_uint,
        ctypes.c_void_p, ctypes.c_void_p,
    ]  # fmt: skip

    def speak(text: str, voice: str, speed: float = 1.0) -> np.ndarray:
        data = text.encode()
        wpm = int(min(max(_NORMAL_WPM * speed, _MIN_WPM), _MAX_WPM))
        with lock:
            pieces.clear()
            if lib.espeak_SetVoiceByName(voices[voice]) != 0:
                raise ValueError(f"espeak-ng has no voice `{voice}`")
            lib.espeak_SetParameter(_RATE, wpm, 0)
            lib.espeak_Synth(data, len(data) + 1, 0, 0, 0, _CHARS_UTF8, None, None)
            lib.espeak_Synchronize()
            audio = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        return audio.astype(np.float32)

    speak.__annotations__ = {
        "text": str,
        "voice": Annotated[Literal[tuple(voices)], Parameter.AudioVoice],
        "speed": Annotated[
            float, Parameter.AudioSpeed(min=_MIN_WPM / _NORMAL_WPM, max=_MAX_WPM / _NORMAL_WPM)
        ],
        "return": Annotated[np.ndarray, Parameter.Audio(sample_rate=sample_rate)],
    }
    speak.collect = collect  # type: ignore[attr-defined]  # keeps the C callback alive with the predictor
    return [speak]


def _voices(lib: ctypes.CDLL) -> dict[str, bytes]:
    """Each voice by its primary language code (en-us, fr-fr, …), English first so it is the default."""
    lib.espeak_ListVoices.restype = ctypes.POINTER(ctypes.POINTER(_Voice))
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
