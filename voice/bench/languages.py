"""``voice bench languages``: which language Whisper hears, and what limiting it to a
list is worth.

Whisper can name the language of a clip itself, but on the first second or two of a
turn it errs, and every error is a whole turn decoded in the wrong language. So
``asr.languages`` (``en,de,fr,es,zh``) lets each pass choose only among the languages
a deployment expects. This bench measures both ways on real speech: the corpus's
multilingual clips (Mandarin, German, French, Spanish) and its English read speech.

* ``prefix``: the language Whisper finds likeliest in the clip's first 1, 2 and 3
  seconds and in the whole clip, among all 99 ("open") and among the list ("limited");
  the same window a partial pass encodes, one decoder step.
* ``streamed``: each clip through the incremental listener in virtual time, as a
  conversation hears it, with ``asr.languages`` set: the language of its finals and
  their error rate (CER for Mandarin, WER otherwise), beside the same clip decoded with
  its true language given (the best a fixed setting could do).
"""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from voice.app.build import build_listener, load_recognizer
from voice.audio import read_wav
from voice.bench.corpus import load_corpus
from voice.bench.mandarin import SHARED_CORPUS, TESTS_CORPUS, cer, edit_distance
from voice.config import Settings, with_language
from voice.events import Final
from voice.listen.runner import listen_virtual

LANGUAGES = "en,de,fr,es,zh"
PREFIXES_S = (1.0, 2.0, 3.0)
ENGLISH_CLIPS = 12
_PUNCTUATION = re.compile(r"[^\w'\s]+", re.UNICODE)


def _words(text: str) -> list[str]:
    return _PUNCTUATION.sub(" ", text.lower()).split()


def wer(reference: str, hypothesis: str) -> tuple[int, int]:
    """Word errors and reference words (lower case, punctuation dropped)."""
    ref, hyp = _words(reference), _words(hypothesis)
    return edit_distance(ref, hyp), len(ref)  # type: ignore[arg-type]


def _clips(corpus: str | Path | None) -> list[dict[str, Any]]:
    root = Path(corpus) / "multilingual" if corpus else None
    if root is None or not root.is_dir():
        root = SHARED_CORPUS if SHARED_CORPUS.is_dir() else TESTS_CORPUS
    rows = [
        json.loads(line)
        for line in (root / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    clips = [
        {
            "file": r["file"],
            "path": root / r["file"],
            "language": r["language"],
            "text": str(r.get("text_simplified") or r["text"]),
        }
        for r in rows
    ]
    speech = [c for c in load_corpus(root.parent if corpus is None else corpus) if c.text]
    for clip in speech[:ENGLISH_CLIPS]:
        clips.append(
            {"file": clip.path.name, "path": clip.path, "language": "en", "text": clip.text}
        )
    return clips


def _streamed(settings: Settings, engine: Any, audio: Any) -> tuple[str, list[str]]:
    lead = np.zeros(8000, np.float32)  # people pause before speaking: VAD pre-roll
    finals = [
        e
        for e in listen_virtual(build_listener(settings), engine, np.concatenate([lead, audio]))
        if isinstance(e, Final)
    ]
    return " ".join(e.text for e in finals), [e.language for e in finals]


def bench_languages(settings: Settings, corpus: str | Path | None = None) -> dict[str, Any]:
    limited = [c.strip() for c in LANGUAGES.split(",")]
    chooser = dataclasses.replace(settings.asr, languages=LANGUAGES)
    settings.conversation.language = "zh"  # any non-English: the multilingual model
    settings.asr.language = ""
    settings = with_language(settings)
    engine = load_recognizer(settings)  # scores only: its own language does not matter
    choosing = dataclasses.replace(
        settings, asr=dataclasses.replace(chooser, model=settings.asr.model)
    )
    picker = load_recognizer(choosing)
    told: dict[str, tuple[Settings, Any]] = {}  # each language given, one engine each
    rows: list[dict[str, Any]] = []
    for clip in _clips(corpus):
        audio = read_wav(clip["path"])
        row: dict[str, Any] = {"file": clip["file"], "language": clip["language"]}
        for label, seconds in [*((f"{s:g}s", s) for s in PREFIXES_S), ("whole", None)]:
            part = audio if seconds is None else audio[: int(seconds * 16000)]
            scores = engine.language_scores(part)
            row[f"open_{label}"] = max(scores, key=scores.__getitem__)
            row[f"limited_{label}"] = max(limited, key=lambda c: scores.get(c, 0.0))
        text, heard = _streamed(choosing, picker, audio)
        if clip["language"] not in told:
            given = dataclasses.replace(
                settings, asr=dataclasses.replace(settings.asr, language=clip["language"])
            )
            told[clip["language"]] = given, load_recognizer(given)
        oracle_text, _ = _streamed(*told[clip["language"]], audio)
        row.update(streamed=text, streamed_languages=heard, told=oracle_text)
        row["reference"] = clip["text"]
        rows.append(row)
    return _summary(rows, settings.asr.model)


def _rate(rows: list[dict[str, Any]], key: str) -> float | None:
    """The error rate of ``key``'s text over ``rows``: CER for Mandarin, WER otherwise."""
    if not rows:
        return None
    if rows[0]["language"] == "zh":
        return round(cer([(r["reference"], r[key]) for r in rows]), 4)
    errors = [wer(r["reference"], r[key]) for r in rows]
    total = sum(n for _, n in errors)
    return round(sum(e for e, _ in errors) / total, 4) if total else None


def _summary(rows: list[dict[str, Any]], model: str) -> dict[str, Any]:
    labels = [f"{s:g}s" for s in PREFIXES_S] + ["whole"]
    by_language: dict[str, Any] = {}
    for language in sorted({r["language"] for r in rows}):
        mine = [r for r in rows if r["language"] == language]
        entry: dict[str, Any] = {"clips": len(mine)}
        for way in ("open", "limited"):
            entry[way] = {
                label: sum(r[f"{way}_{label}"] == language for r in mine) for label in labels
            }
        entry["streamed_right"] = sum(
            bool(r["streamed_languages"]) and all(x == language for x in r["streamed_languages"])
            for r in mine
        )
        entry["error_streamed"] = _rate(mine, "streamed")
        entry["error_told"] = _rate(mine, "told")
        by_language[language] = entry
    return {
        "model": model,
        "languages": LANGUAGES,
        "clips": len(rows),
        "by_language": by_language,
        "rows": rows,
    }
