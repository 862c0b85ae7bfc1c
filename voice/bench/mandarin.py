"""``voice bench mandarin``: character error rate of Mandarin recognition.

Mandarin is scored by characters (it has no spaces), after dropping punctuation and
spaces and converting both sides to simplified characters (OpenCC t2s), as the
multilingual corpus's README asks. Three figures per clip, on the same model:

* ``raw``: the whole file through faster-whisper's own ``transcribe`` told ``zh``, its
  text as it came (Whisper writes traditional characters about as often as not);
* ``whole``: the same, converted to simplified (what ``asr.language = "zh"`` gives);
* ``streaming``: the clip streamed through the project's incremental listener (VAD,
  partial passes, the final pass) in virtual time, its finals joined: what a
  conversation hears.

The reference is the clip's ``text_simplified`` where it has one, else ``text``. Digits
are read one by one on both sides ("1,2线" and "一二线", "7080787" and "七零八零七八七";
"幺", the way "1" is said in a phone number, as "一"), so a number written either way
scores the same; ``raw`` converts only the reference to simplified characters.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import numpy as np

from voice.app.build import build_listener, load_recognizer
from voice.audio import read_wav
from voice.config import Settings, with_language
from voice.errors import VoiceError
from voice.events import Final
from voice.listen.runner import listen_virtual
from voice.listen.whisper import simplified_chinese

SHARED_CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "multilingual"
TESTS_CORPUS = Path(__file__).resolve().parents[2] / "tests" / "corpus" / "multilingual"
_NOT_SCORED = re.compile(r"[\W_]+", re.UNICODE)  # punctuation and spaces, any script


_DIGITS = str.maketrans("0123456789幺", "零一二三四五六七八九一")


def scored(text: str, simplify: bool = True) -> str:
    """What CER compares: simplified characters without punctuation or spaces, each
    digit as its character."""
    text = simplified_chinese(text) if simplify else text
    return _NOT_SCORED.sub("", text).translate(_DIGITS).lower()


def edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def cer(pairs: list[tuple[str, str]], simplify: bool = True) -> float:
    """Character error rate over (reference, hypothesis) pairs, both :func:`scored`
    (the hypothesis as it is when not ``simplify``)."""
    errors = sum(edit_distance(scored(r), scored(h, simplify)) for r, h in pairs)
    total = sum(len(scored(r)) for r, _ in pairs)
    return errors / total if total else 0.0


def mandarin_clips(folder: str | Path | None = None) -> list[dict[str, Any]]:
    root = Path(folder) if folder else (SHARED_CORPUS if SHARED_CORPUS.is_dir() else TESTS_CORPUS)
    manifest = root / "manifest.jsonl"
    if not manifest.is_file():
        raise VoiceError(f"no manifest.jsonl in {root}.", "Give --corpus the multilingual folder.")
    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    clips = [r for r in rows if r.get("language") == "zh"]
    for row in clips:
        row["path"] = root / row["file"]
    return clips


def bench_mandarin(settings: Settings, corpus: str | Path | None = None) -> dict[str, Any]:
    settings.conversation.language = "zh"
    settings.asr.language = ""
    settings = with_language(settings)
    engine = load_recognizer(settings)
    rows: list[dict[str, Any]] = []
    audio_s = compute_s = 0.0
    for clip in mandarin_clips(corpus):
        audio = read_wav(clip["path"])
        reference = str(clip.get("text_simplified") or clip["text"])
        segments, _ = engine.model.transcribe(
            audio, language="zh", beam_size=settings.asr.beam_size, vad_filter=False
        )
        raw = "".join(s.text for s in segments)
        lead = np.zeros(8000, np.float32)  # people pause before speaking: VAD pre-roll
        started = time.perf_counter()
        finals = [
            e.text
            for e in listen_virtual(build_listener(settings), engine, np.concatenate([lead, audio]))
            if isinstance(e, Final)
        ]
        compute_s += time.perf_counter() - started
        audio_s += len(audio) / 16000
        rows.append(
            {
                "file": clip["file"],
                "reference": reference,
                "raw": raw,
                "whole": simplified_chinese(raw),
                "streaming": " ".join(finals),
                "cer_streaming": round(cer([(reference, " ".join(finals))]), 3),
            }
        )
    pairs = {k: [(r["reference"], r[k]) for r in rows] for k in ("raw", "whole", "streaming")}
    return {
        "model": settings.asr.model,
        "clips": len(rows),
        "cer_raw": round(cer(pairs["raw"], simplify=False), 4),
        "cer_whole": round(cer(pairs["whole"]), 4),
        "cer_streaming": round(cer(pairs["streaming"]), 4),
        "streaming_rtf": round(compute_s / audio_s, 3) if audio_s else None,
        "rows": rows,
    }
