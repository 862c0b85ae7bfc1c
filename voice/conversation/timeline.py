"""A picture of one simulated conversation, for a person to read at a glance.

Event logs and latency tables say what happened, not what overlapped: the assistant
talking over the user, a pause that resumed, a speculative reply thrown away. This
draws both sides' audio on one time axis with the VAD spans, transcripts, replies,
session state, barge-in markers and latencies laid over it, so that a conversation
test that misbehaves can be diagnosed from one PNG instead of a scroll of JSON.
matplotlib is imported only when a picture is drawn, so importing this is cheap.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from matplotlib.axes import Axes

SAMPLE_RATE = 16_000
INCHES_PER_SECOND = 0.5  # 60 in (the cap) at two minutes; 400 ms of partials is 20 px
MIN_WIDTH_IN, MAX_WIDTH_IN, HEIGHT_IN, DPI = 12.0, 60.0, 7.0, 100
PARTIAL_GAP_MS = 400.0
USER_COLOR, ASSISTANT_COLOR = "#4c72b0", "#55a868"

STATE_COLORS = {
    "listening": "#d9d9d9",
    "user_speaking": "#4c72b0",
    "speculating": "#b07aa1",
    "thinking": "#f2c14e",
    "speaking": "#55a868",
    "paused": "#f28e2b",
    "interrupted": "#c44e52",
    "idle": "#f7f7f7",  # behind the wake word: nothing is recognised
}
# Event type -> (colour, line style, label) of a vertical line across all rows.
MARKERS = {
    "interrupted": ("red", "-", "interrupted"),
    "paused": ("orange", "--", "paused"),
    "resumed": ("green", "--", "resumed"),
    "speculation_start": ("purple", ":", "spec"),
    "error": ("black", "-.", "error"),
    "wake": ("teal", "-", "wake"),
    "idle": ("gray", ":", "idle"),
    "tool_call": ("saddlebrown", "-", "call"),
    "tool_result": ("saddlebrown", ":", "result"),
}

Event = dict[str, Any]
Span = tuple[float, float]  # ms


def marker(event: Event) -> tuple[str, str, str]:
    """The colour, line style and label of an event's vertical line; a tool's line
    names the call ("call sell") and how it ended ("sell cancelled")."""
    color, style, label = MARKERS[event["type"]]
    if event["type"] == "tool_call":
        label = f"call {_shorten(event.get('name'), 20)}"
    elif event["type"] == "tool_result":
        label = f"{_shorten(event.get('name'), 20)} {event.get('status', '')}"
    return color, style, label


def _num(event: Event, key: str) -> float | None:
    value = event.get(key)
    return float(value) if isinstance(value, int | float) else None


def _at(event: Event) -> float:
    at = _num(event, "audio_ms")
    return 0.0 if at is None else at


def _shorten(text: object, limit: int) -> str:
    s = " ".join(str(text or "").split())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _duration_ms(events: list[Event], *audio: npt.NDArray[np.float32]) -> float:
    times = [len(a) * 1000.0 / SAMPLE_RATE for a in audio]
    for e in events:
        times += [t for k in ("audio_ms", "start_ms", "end_ms") if (t := _num(e, k)) is not None]
    return max([1000.0, *times])


def _envelope(audio: npt.NDArray[np.float32], buckets: int) -> tuple[Any, Any, Any]:
    """Min and max of each of ``buckets`` slices: what a pixel column would show."""
    x = np.nan_to_num(np.asarray(audio, dtype=np.float32).ravel())
    buckets = max(1, min(buckets, len(x)))
    starts = np.linspace(0, len(x), buckets + 1).astype(np.int64)[:-1]
    return starts / SAMPLE_RATE, np.minimum.reduceat(x, starts), np.maximum.reduceat(x, starts)


def _draw_wave(ax: Axes, audio: npt.NDArray[np.float32], buckets: int, color: str) -> None:
    if len(audio) == 0:
        ax.set_ylim(-1.0, 1.0)
        return
    t, lo, hi = _envelope(audio, buckets)
    ax.fill_between(t, lo, hi, color=color, linewidth=0.0, step="post")
    peak = max(float(np.max(np.abs(hi))), float(np.max(np.abs(lo))), 1e-3)
    ax.set_ylim(-1.1 * peak, 1.1 * peak)


def _user_spans(events: list[Event], end_ms: float) -> list[Span]:
    """VAD speech, ``speech_start`` to ``speech_end`` by utterance; an open one runs on."""
    starts: dict[Any, float] = {}
    spans: list[Span] = []
    for e in events:
        uid, kind = e.get("utterance_id"), e.get("type")
        if kind == "speech_start":
            start = _num(e, "start_ms")
            starts[uid] = _at(e) if start is None else start
        elif kind == "speech_end":
            start = starts.pop(uid, None)
            start = _num(e, "start_ms") if start is None else start
            end = _num(e, "end_ms")
            spans.append((_at(e) if start is None else start, _at(e) if end is None else end))
    return spans + [(start, end_ms) for start in starts.values()]


def _reply_spans(events: list[Event], end_ms: float) -> list[tuple[float, float, str, bool]]:
    """(start, end, text, interrupted) per reply, from first audio (else reply_start) to end."""
    starts: dict[Any, float] = {}
    texts: dict[Any, str] = {}
    out: list[tuple[float, float, str, bool]] = []
    for e in events:
        rid, kind = e.get("reply_id"), e.get("type")
        if kind == "reply_start":
            starts.setdefault(rid, _at(e))
        elif kind == "playback_start":
            starts[rid] = _at(e)
        elif kind == "reply_text":
            texts[rid] = texts.get(rid, "") + str(e.get("text") or "")
        elif kind == "reply_end":
            text = str(e.get("text") or texts.pop(rid, ""))
            out.append((starts.pop(rid, _at(e)), _at(e), text, bool(e.get("interrupted"))))
    return out + [(start, end_ms, texts.get(rid, ""), False) for rid, start in starts.items()]


def _state_segments(events: list[Event], end_ms: float) -> list[tuple[float, float, str]]:
    changes = [(_at(e), str(e.get("state"))) for e in events if e.get("type") == "state"]
    ends = [t for t, _ in changes[1:]] + [end_ms] * bool(changes)
    return [(t, end, state) for (t, state), end in zip(changes, ends, strict=True)]


def _draw_transcripts(ax: Axes, events: list[Event]) -> None:
    last = float("-inf")
    for e in events:
        t, kind = _at(e), e.get("type")
        if kind == "partial" and t - last >= PARTIAL_GAP_MS:
            last = t
            text = _shorten(e.get("text"), 40)
            ax.text(t / 1000, 0.02, text, rotation=90, fontsize=6, color="grey", clip_on=True)
        elif kind == "final":
            ax.plot([t / 1000], [0.93], marker="v", color="#222222", markersize=6)
            text = _shorten(e.get("text"), 40)
            ax.text(t / 1000, 0.86, text, va="top", fontsize=8, fontweight="bold", clip_on=True)
    ax.set_ylim(0.0, 1.0)
    ax.set_yticks([])
    ax.set_ylabel("user text")


def _draw_replies(ax: Axes, events: list[Event], end_ms: float) -> None:
    xaxis = ax.get_xaxis_transform()
    for start, end, text, interrupted in _reply_spans(events, end_ms):
        color = STATE_COLORS["interrupted"] if interrupted else ASSISTANT_COLOR
        ax.axvspan(start / 1000, end / 1000, color=color, alpha=0.15, lw=0.0, zorder=0)
        label = _shorten(text, 60) + (" [cut]" if interrupted else "")
        box = {"facecolor": "white", "alpha": 0.7, "linewidth": 0.0, "pad": 1.0}
        ax.text(
            start / 1000, 0.97, label, transform=xaxis, va="top", fontsize=7, bbox=box, clip_on=True
        )


def _draw_states(ax: Axes, events: list[Event], end_ms: float) -> None:
    for start, end, state in _state_segments(events, end_ms):
        color = STATE_COLORS.get(state, "white")
        ax.broken_barh([(start / 1000, (end - start) / 1000)], (0.0, 1.0), facecolors=color)
    ax.set_ylim(0.0, 1.0)
    ax.set_yticks([])
    ax.set_ylabel("state")


def _draw_markers(axes: list[Axes], events: list[Event]) -> None:
    top, state_ax = axes[0], axes[-1]
    kinds = (*MARKERS, "speculation_cancel")
    marked = [e for e in events if e.get("type") in kinds and _num(e, "audio_ms") is not None]
    for i, e in enumerate(marked):
        t = _at(e) / 1000
        if e["type"] == "speculation_cancel":
            state_ax.plot([t], [0.5], marker="x", color="purple", markersize=8, mew=2)
            color, label = "purple", f"cancel {_shorten(e.get('reason'), 20)}"
        else:
            color, style, label = marker(e)
            for ax in axes:
                ax.axvline(t, color=color, linestyle=style, linewidth=1.0, alpha=0.8)
        y = 1.01 + 0.09 * (i % 3)  # stagger labels of nearby markers
        top.text(t, y, label, transform=top.get_xaxis_transform(), fontsize=7, color=color)


def _draw_metrics(ax: Axes, events: list[Event]) -> None:
    xaxis = ax.get_xaxis_transform()
    cut_at = {e.get("reply_id"): _at(e) for e in events if e.get("type") == "interrupted"}
    for m in (e for e in events if e.get("type") == "turn_metrics"):
        v2v, user_end = _num(m, "voice_to_voice_ms"), _num(m, "user_end_ms")
        if v2v is not None and user_end is not None:
            a, b = user_end / 1000, (user_end + v2v) / 1000
            arrow = {"arrowstyle": "<->", "color": "black", "linewidth": 1.0}
            ax.annotate("", xy=(b, 0.12), xytext=(a, 0.12), xycoords=xaxis, arrowprops=arrow)
            ax.text(
                (a + b) / 2, 0.16, f"v2v {v2v:.0f} ms", transform=xaxis, ha="center", fontsize=7
            )
        barge = _num(m, "barge_in_ms")
        if barge is not None:
            t = cut_at.get(m.get("reply_id"), _at(m)) / 1000
            label = f"barge-in {barge:.0f} ms"
            ax.text(t, 0.3, label, transform=xaxis, color="red", fontsize=7, clip_on=True)


def render_timeline(
    path: str | Path,
    events: list[dict[str, Any]],
    heard: npt.NDArray[np.float32],
    played: npt.NDArray[np.float32],
    title: str = "",
) -> None:
    """Draw the conversation as a PNG at ``path`` (whatever its suffix).

    ``heard`` is the assistant's microphone input and ``played`` its output, both mono
    16 kHz on the events' audio_ms timeline; the shorter is treated as silence after
    its end. Event types this does not know, and missing keys, are skipped.
    """
    import matplotlib

    if "matplotlib.pyplot" not in sys.modules:  # never switch an embedder's live backend
        matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.patches import Patch

    end_ms = _duration_ms(events, heard, played)
    width = min(MAX_WIDTH_IN, max(MIN_WIDTH_IN, INCHES_PER_SECOND * end_ms / 1000))
    buckets = int(width * DPI)
    fig = Figure(figsize=(width, HEIGHT_IN), dpi=DPI, layout="constrained")
    ratios = [2.5, 1.8, 2.5, 0.6]
    axes: list[Axes] = list(fig.subplots(4, 1, sharex=True, height_ratios=ratios))
    user_ax, text_ax, reply_ax, state_ax = axes

    _draw_wave(user_ax, heard, buckets, USER_COLOR)
    for start, end in _user_spans(events, end_ms):
        user_ax.axvspan(start / 1000, end / 1000, color=USER_COLOR, alpha=0.15, lw=0.0, zorder=0)
    user_ax.set_ylabel("user (mic)")
    _draw_transcripts(text_ax, events)
    _draw_wave(reply_ax, played, buckets, ASSISTANT_COLOR)
    _draw_replies(reply_ax, events, end_ms)
    _draw_metrics(reply_ax, events)
    reply_ax.set_ylabel("assistant (speaker)")
    _draw_states(state_ax, events, end_ms)
    _draw_markers(axes, events)

    state_ax.set_xlim(0.0, end_ms / 1000)
    state_ax.set_xlabel("time (s)")
    handles = [Patch(facecolor=c, label=s) for s, c in STATE_COLORS.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=len(handles), fontsize=7)
    if title:
        fig.suptitle(title)
    fig.savefig(path, format="png")
