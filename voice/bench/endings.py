"""``voice bench endings``: short turns that end in a short word, as a kiosk hears them.

"What time is it?" and "Who are you?" are whole questions, but their last word runs
into the one before it ("is it" said as one beat), and the word-timing guard
(:mod:`voice.listen.spoken`) may take it for a word Whisper added past the speech:
it drops the word, reads "What time is", and waits the unfinished silence. This
says each text in every voice here (the bundled Piper voice at several speeds and
pitches, espeak-ng voices where installed) through a whole session, alone, and
counts per text how often the turn's end waited the unfinished silence
(``turn.incomplete_silence_ms``), with voice-to-voice (end of speech to the reply's
first sound). ``voice bench eot --json`` shows the guard's alignments themselves
(``live_tail``) on real speech.
"""

from __future__ import annotations

from typing import Any

from voice.config import Settings
from voice.stats import p50_p95

TEXTS = (
    "What time is it?",
    "Where is it?",
    "How much is it?",
    "Who are you?",
    "Where are they?",
    "What about you?",
    "I like it.",
    "Tell me more about it.",
    "Thank you.",
    "Can you help me?",
    "What is this?",
    "Can I see them?",
    "Is that so?",
    "Do you have one?",
)


def bench_endings(settings: Settings, limit: int | None = None) -> dict[str, Any]:
    import dataclasses

    from voice.app.build import build_session, load_engines
    from voice.bench.wake_voices import Voices
    from voice.transports.simulate import Script, ScriptTurn, simulate

    base = dataclasses.replace(settings)
    base.llm = dataclasses.replace(settings.llm, max_reply_tokens=4)  # the first sound only
    engines = load_engines(base)
    voices = Voices()
    longest = settings.turn.incomplete_silence_ms
    rows: list[dict[str, Any]] = []
    for text in TEXTS[: limit or None]:
        waits, v2v = [], []
        for said in voices.say(text):
            session = build_session(base, engines)
            script = Script([ScriptTurn(said.audio, said.voice, at_s=0.5)])
            events = simulate(script, session, engines).events
            session.close()
            metrics = [e for e in events if e["type"] == "turn_metrics"]
            if metrics:
                waits.append(float(metrics[0]["end_silence_ms"]))
                if metrics[0]["voice_to_voice_ms"] is not None:
                    v2v.append(float(metrics[0]["voice_to_voice_ms"]))
        rows.append(
            {
                "text": text,
                "voices": len(voices.names),
                "waited_unfinished": sum(w >= longest for w in waits),
                "end_silence_ms": p50_p95(waits),
                "voice_to_voice_ms": p50_p95(v2v),
            }
        )
    return {"texts": rows}


def format_table(report: dict[str, Any]) -> str:
    lines = [
        "| text | waited the unfinished silence | voice-to-voice p50 / p95 |",
        "| --- | --- | --- |",
    ]
    for row in report["texts"]:
        v2v = row["voice_to_voice_ms"]
        lines.append(
            f"| {row['text']} | {row['waited_unfinished']}/{row['voices']} "
            f"| {v2v['p50']} / {v2v['p95']} ms |"
        )
    return "\n".join(lines)
