"""The three turn sets of ``voice bench turns``, built from the corpus at bench time.

- ``hesitation``: read sentences with one pause of 0.5-2.0 s spliced in right after
  a function word ("...out of the [pause] apartment"), at a word boundary that
  faster-whisper's word timestamps give, the pause filled with the clip's own room
  tone (a reader's pause after a *finished* sentence may be taken as a turn end; a
  pause after "the" must not).
- ``pairs``: two sentences of one speaker joined by 0.8-1.5 s of room tone: the
  pause looks finished, so a reply may start, but the answer must cover both.
- ``hesitation_heldout`` and ``hesitation_early`` (not run unless named): the same
  kind of pause at places the rules were never tuned on: in every read sentence, after
  the function word nearest two-thirds (one third) of the way through, 0.7-1.5 s; never
  a word an earlier set pauses after. The end-of-turn rules were chosen on
  ``hesitation``, and ``hesitation_early`` was added after they were (4 December): these
  sets say whether they hold elsewhere.
- ``hesitation_noisy`` and ``pairs_noisy`` (not run unless named): the ``hesitation``
  and ``pairs`` items with a steady background under the whole clip, pause included (a
  tap running, an exercise bike, music: the corpus's four long noise clips, looped), at
  ``NOISY_SNR_DB`` under the speech: a kitchen or a living room, where the room's noise
  is no longer the quiet the rules were tuned in. The truth stays the clean speech's.
- ``conversation``: spontaneous speech (AMI meeting headsets and monologues, the MFA
  monologues), cut into the speakers' turns: a turn runs until another speaker
  takes the floor (a segment of 1 s or more that the holder does not talk through),
  so others' backchannels do not end it.

Every item is one clip fed as the microphone, with the user's own speech inside it
as ground truth (``speech``: intervals in the clip's seconds, gaps under
``MIN_PAUSE_S`` merged, so every gap left is a mid-turn pause). The sets are
deterministic and kept in memory: the bench runs several modes on the same items.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from voice.audio import read_wav
from voice.audio.format import FRAME_SAMPLES, SAMPLE_RATE
from voice.bench.corpus import DEFAULT_CORPUS, Clip, audible_frames, load_corpus
from voice.stats import normalize_text

log = logging.getLogger(__name__)

Float32Array = npt.NDArray[np.float32]
Word = tuple[str, float, float]  # (text, start s, end s)
WordsOf = Callable[[Float32Array], list[Word]]
Interval = tuple[float, float]

SETS = ("hesitation", "pairs", "conversation")
# The noisy sets, and the set each puts a background under.
NOISY_OF = {"hesitation_noisy": "hesitation", "pairs_noisy": "pairs"}
# Known sets that are run only when named (``--sets``): held out from the defaults' tuning.
EXTRA_SETS = ("hesitation_heldout", "hesitation_early", *NOISY_OF)
MIN_PAUSE_S = 0.2  # a silence this long inside a turn is a mid-turn pause
LEAD_S = 0.5  # room tone before the speech (the VAD's pre-roll needs history)
TAIL_S = 1.0  # room tone after it, so the end is not a cliff into digital silence
HESITATION_PAUSES_S = (0.5, 1.0, 1.5, 2.0)
HELDOUT_PAUSES_S = (0.7, 1.0, 1.3, 1.5)  # all within the target's 1.5 s
# Where in the sentence each held-out set pauses (the main set: half way), in order: a
# set never pauses after a word that the main set or one before it in this list does.
HELDOUT_AT = {"hesitation_heldout": 2 / 3, "hesitation_early": 1 / 3}
PAIR_PAUSES_S = (0.8, 1.0, 1.2, 1.5)
MIN_SENTENCE_S = 2.5
# The shortest sentences that qualify, to keep one mode's run in minutes on 2 cores:
# 16 hesitations (4 per pause length) and 6 pairs.
HESITATION_ITEMS = 16
PAIR_ITEMS = 6
READ_PREFIXES = ("librispeech_", "ljspeech_", "cmu_arctic_", "vctk_")
FUNCTION_WORDS = frozenset({
    "the", "a", "an", "to", "of", "and", "in", "on", "at", "for", "with", "from", "by", "my",
    "your", "our", "their", "his", "her", "its", "this", "that", "these", "those", "some",
    "into", "about", "as", "or", "but",
})  # fmt: skip
FLOOR_S = 1.0  # another speaker's segment this long takes the floor (unless talked through)
FILLERS = frozenset({"um", "uh", "er", "ah", "mm", "hmm", "y'know"})
CROSSFADE_S = 0.02
# Room tone is the quietest stretch of the longest of these that is quiet (room_tone).
TONE_WINDOWS_S = (0.3, 0.2, 0.1)
TONE_WITHIN_DB = 3.0
# Steady backgrounds of the corpus (``noise/``, 10 s each), and how far under the speech
# they play: active speech RMS against the noise's RMS, as the corpus's own mixtures are
# made. 10 dB is a busy kitchen; the corpus's 5 dB and 0 dB mixtures test recognition.
BACKGROUNDS = (
    "household_running_tap", "household_exercise_bike", "music_vibe_ace_jazz",
    "music_brahms_hungarian_dance5",
)  # fmt: skip
NOISY_SNR_DB = 10.0


@dataclass
class TurnItem:
    """One clip fed as the user's microphone, and the truth about the user's turn in it."""

    name: str
    set: str
    audio: Float32Array
    speech: list[Interval]  # the user's own speech, seconds into ``audio``
    reference: str = ""  # normalised words of the turn; "" where there is no transcript
    pause_s: float | None = None  # the spliced pause (hesitation, pairs)
    note: str = ""  # where the pause is, which speaker, ...
    pause_at_s: float | None = None  # where a hesitation's spliced pause starts in ``audio``

    @property
    def pauses(self) -> list[Interval]:
        """The mid-turn pauses: the gaps between the speech intervals."""
        return [(a[1], b[0]) for a, b in itertools.pairwise(self.speech)]

    @property
    def speech_s(self) -> float:
        return sum(end - start for start, end in self.speech)


def decision_points(item: TurnItem, delay_s: float = 0.0) -> list[tuple[float, bool]]:
    """(time, is the real end) for each mid-turn pause long enough to be judged
    ``delay_s`` into it (at least ``MIN_PAUSE_S``), and the end: where an offline
    end-of-turn judge is asked (``voice bench prosody``, ``eot``)."""
    points = []
    for index, (_, end) in enumerate(item.speech):
        last = index == len(item.speech) - 1
        gap = None if last else item.speech[index + 1][0] - end
        if last or (gap is not None and gap >= max(MIN_PAUSE_S, delay_s + 0.05)):
            points.append((end + delay_s, last))
    return points


# -- signal helpers -----------------------------------------------------------------


def intervals(starts_ends: list[Interval], min_gap_s: float = MIN_PAUSE_S) -> list[Interval]:
    """Sorted intervals with every gap shorter than ``min_gap_s`` closed."""
    out: list[Interval] = []
    for start, end in sorted(starts_ends):
        if out and start - out[-1][1] < min_gap_s:
            out[-1] = (out[-1][0], max(out[-1][1], end))
        else:
            out.append((start, end))
    return out


def frame_intervals(frames: npt.NDArray[np.intp]) -> list[Interval]:
    """20 ms frame indices as (start, end) seconds, pauses under ``MIN_PAUSE_S`` closed."""
    step = FRAME_SAMPLES / SAMPLE_RATE
    return intervals([(float(f) * step, float(f + 1) * step) for f in frames])


def clip_to(spans: list[Interval], within: list[Interval]) -> list[Interval]:
    """The parts of ``spans`` inside ``within``."""
    out = []
    for a, b in spans:
        for lo, hi in within:
            if min(b, hi) > max(a, lo):
                out.append((max(a, lo), min(b, hi)))
    return out


def room_tone(audio: Float32Array, seconds: float) -> Float32Array:
    """``seconds`` of the clip's own background, looped with cross-fades (digital
    silence would be a cue no microphone gives): its quietest stretch of the longest of
    :data:`TONE_WINDOWS_S` that is no more than :data:`TONE_WITHIN_DB` louder than its
    quietest 0.1 s. Short clips trimmed close to their words have no 0.3 s of quiet
    anywhere: there the quietest 0.3 s held a syllable, and the "pause" spliced into
    five of the corpus's clips (four CMU Arctic, one LJSpeech) was a loop of it, 15 to
    35 dB over the room, that webrtcvad heard as speech throughout."""
    n = round(seconds * SAMPLE_RATE)
    if n <= 0:
        return np.zeros(0, dtype=np.float32)
    frames = len(audio) // FRAME_SAMPLES
    energy = np.mean(audio[: frames * FRAME_SAMPLES].reshape(frames, -1) ** 2, axis=1)
    quietest: list[tuple[float, int, int]] = []  # (mean energy, first frame, frames)
    for window_s in TONE_WINDOWS_S:
        per = max(1, round(window_s * SAMPLE_RATE / FRAME_SAMPLES))
        if frames > per:
            means = np.convolve(energy, np.ones(per) / per, mode="valid")
            at = int(np.argmin(means))
            quietest.append((float(means[at]), at, per))
    if not quietest:  # shorter than any window: all of it
        return looped(audio, n)
    floor = quietest[-1][0] * 10 ** (TONE_WITHIN_DB / 10)
    _, at, per = next(q for q in quietest if q[0] <= floor)
    return looped(audio[at * FRAME_SAMPLES : (at + per) * FRAME_SAMPLES], n)


def looped(piece: Float32Array, n: int) -> Float32Array:
    """``n`` samples of ``piece`` repeated, each seam cross-faded (no click)."""
    fade = min(int(CROSSFADE_S * SAMPLE_RATE), len(piece) // 4)
    out = np.zeros(0, dtype=np.float32)
    while len(out) < n:
        out = crossfade(out, piece, fade)
    return out[:n].astype(np.float32)


def crossfade(a: Float32Array, b: Float32Array, fade: int) -> Float32Array:
    """``a`` then ``b``, overlapping by ``fade`` samples with linear ramps (no click)."""
    fade = min(fade, len(a), len(b))
    if fade == 0:
        return np.concatenate([a, b]).astype(np.float32)
    ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)
    mid = a[-fade:] * (1 - ramp) + b[:fade] * ramp
    return np.concatenate([a[:-fade], mid, b[fade:]]).astype(np.float32)


def _quietest_near(audio: Float32Array, at_s: float, lo_s: float, hi_s: float) -> float:
    """The start of the quietest 10 ms within [lo_s, hi_s] nearest ``at_s``: a cut there
    falls between phonemes even where Whisper's timestamps are off by a few tens of ms."""
    hop = SAMPLE_RATE // 100
    lo, hi = max(0, int(lo_s * SAMPLE_RATE)), min(len(audio), int(hi_s * SAMPLE_RATE))
    if hi - lo < 2 * hop:
        return at_s
    starts = np.arange(lo, hi - hop, hop)
    energy = np.array([float(np.mean(audio[s : s + hop] ** 2)) for s in starts])
    distance = np.abs(starts / SAMPLE_RATE - at_s)
    best = int(np.argmin(energy * (1.0 + distance)))  # quiet first, near as a tie-break
    return float(starts[best] / SAMPLE_RATE)


def _with_tone(speech: Float32Array, tone_from: Float32Array) -> tuple[Float32Array, float]:
    """``speech`` with ``LEAD_S`` and ``TAIL_S`` of room tone around it; and the lead."""
    fade = int(CROSSFADE_S * SAMPLE_RATE)
    lead = room_tone(tone_from, LEAD_S + CROSSFADE_S)
    out = crossfade(crossfade(lead, speech, fade), room_tone(tone_from, TAIL_S), fade)
    return out, len(lead) / SAMPLE_RATE - CROSSFADE_S


def _speech_of(audio: Float32Array) -> list[Interval]:
    return frame_intervals(audible_frames(audio))


def _shift(spans: list[Interval], by: float) -> list[Interval]:
    return [(a + by, b + by) for a, b in spans]


# -- (a) hesitations -----------------------------------------------------------------


def hesitation_point(
    words: list[Word], at: float = 0.5, avoid: Collection[int] = ()
) -> tuple[int, float] | None:
    """Where to pause: after the function word nearest ``at`` of the way through the
    sentence (its middle by default) that is not its first or last word, nor one of
    the words ``avoid``; (index of the word, boundary in seconds)."""
    spoken = [(normalize_text(w), s, e) for w, s, e in words]
    target = spoken[0][1] + at * (spoken[-1][2] - spoken[0][1]) if spoken else 0.0
    best: tuple[int, float] | None = None
    for i, (word, _, end) in enumerate(spoken[:-1]):
        if word not in FUNCTION_WORDS or i == 0 or i in avoid:
            continue
        boundary = (end + spoken[i + 1][1]) / 2 if spoken[i + 1][1] > end else end
        if best is None or abs(boundary - target) < abs(best[1] - target):
            best = (i, boundary)
    return best


def splice(audio: Float32Array, at_s: float, pause_s: float) -> Float32Array:
    """``audio`` with ``pause_s`` of its own room tone inserted at ``at_s``."""
    cut = int(at_s * SAMPLE_RATE)
    fade = int(0.005 * SAMPLE_RATE)
    tone = room_tone(audio, pause_s + 2 * fade / SAMPLE_RATE)
    return crossfade(crossfade(audio[:cut], tone, fade), audio[cut:], fade)


def build_hesitations(
    clips: list[Clip], words_of: WordsOf, most: int | None = HESITATION_ITEMS,
    kind: str = "hesitation",
) -> list[TurnItem]:  # fmt: skip
    """The ``most`` shortest sentences (None: all), each paused after its middle function
    word; for a held-out ``kind`` (:data:`HELDOUT_AT`), after the one nearest its place
    in the sentence that neither the tuned set nor an earlier held-out set pauses after."""
    pauses = HESITATION_PAUSES_S if kind == "hesitation" else HELDOUT_PAUSES_S
    items: list[TurnItem] = []
    for clip in sorted(clips, key=lambda c: (c.seconds, c.name)):
        if most is not None and len(items) >= most:
            break
        audio = read_wav(clip.path)
        words = words_of(audio)
        point = hesitation_point(words) if len(words) >= 3 else None
        avoid: list[int] = []
        for name, at in HELDOUT_AT.items():
            if point is None or kind == "hesitation":
                break
            avoid.append(point[0])
            point = hesitation_point(words, at, avoid)
            if name == kind:
                break
        if point is None:
            log.info("%s set: no function word to pause after in %s", kind, clip.name)
            continue
        pause = pauses[len(items) % len(pauses)]
        items.append(_hesitation_item(kind, clip, audio, words, point, pause))
    return items


def _hesitation_item(
    kind: str, clip: Clip, audio: Float32Array, words: list[Word], point: tuple[int, float],
    pause: float,
) -> TurnItem:  # fmt: skip
    """``clip`` with ``pause`` of its room tone spliced in after word ``point[0]``, at
    the quietest instant near the boundary."""
    i, boundary = point
    at = _quietest_near(audio, boundary, words[i][2] - 0.03, words[i + 1][1] + 0.06)
    before = " ".join(w.strip() for w, _, _ in words[max(0, i - 3) : i + 1])
    note = f"...{before} [{pause:.1f} s] {words[i + 1][0].strip()}..."
    name = f"{kind.replace('_', '-')}-{clip.name}-{pause:.1f}s"
    return _read_item(kind, name, splice(audio, at, pause), audio, clip.text, pause, note, at)


def _read_item(
    kind: str, name: str, speech: Float32Array, tone_from: Float32Array, reference: str,
    pause_s: float, note: str, pause_at_s: float | None = None,
) -> TurnItem:  # fmt: skip
    """A hesitation or pair item: room tone around it, its audible frames as the truth
    (``pause_at_s``: where the spliced pause starts in ``speech``)."""
    audio, lead = _with_tone(speech, tone_from)
    at = None if pause_at_s is None else pause_at_s + lead
    return TurnItem(name, kind, audio, _speech_of(audio), reference, pause_s, note, at)


# -- (b) pairs -----------------------------------------------------------------------


def join(first: Float32Array, second: Float32Array, pause_s: float) -> Float32Array:
    """The first sentence's speech, ``pause_s`` of its room tone, the second's speech
    (each trimmed to its audible frames, 50 ms kept around them)."""
    a, b = _speech_of(first), _speech_of(second)
    keep = 0.05
    head = first[: int((a[-1][1] + keep) * SAMPLE_RATE)] if a else first
    tail = second[max(0, int((b[0][0] - keep) * SAMPLE_RATE)) :] if b else second
    fade = int(0.005 * SAMPLE_RATE)
    gap = pause_s - 2 * keep + 2 * fade / SAMPLE_RATE
    return crossfade(crossfade(head, room_tone(first, gap), fade), tail, fade)


def build_pairs(
    clips: list[Clip], speakers: dict[str, str], most: int = PAIR_ITEMS
) -> list[TurnItem]:
    """The ``most`` shortest pairs of consecutive sentences of one speaker."""
    by_speaker: dict[str, list[Clip]] = {}
    for clip in clips:
        by_speaker.setdefault(speakers.get(clip.name, clip.name), []).append(clip)
    chosen = sorted(
        (p for group in by_speaker.values() for p in zip(group[::2], group[1::2], strict=False)),
        key=lambda p: (p[0].seconds + p[1].seconds, p[0].name),
    )[:most]
    items: list[TurnItem] = []
    for first, second in chosen:
        pause = PAIR_PAUSES_S[len(items) % len(PAIR_PAUSES_S)]
        a = read_wav(first.path)
        name = f"pair-{first.name}+{second.name.split('_')[-1]}"
        note = f"{pause:.1f} s between two sentences"
        joined = join(a, read_wav(second.path), pause)
        items.append(
            _read_item("pairs", name, joined, a, f"{first.text} {second.text}", pause, note)
        )
    return items


# -- (c) conversation ------------------------------------------------------------------

Segment = tuple[str, float, float]  # (speaker, start s, end s)


def read_rttm(path: Path) -> dict[str, list[Segment]]:
    """RTTM ``SPEAKER`` lines by file id."""
    out: dict[str, list[Segment]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 8 and parts[0] == "SPEAKER":
            start, dur = float(parts[3]), float(parts[4])
            out.setdefault(parts[1], []).append((parts[7], start, start + dur))
    return out


def floor_turns(segments: list[Segment]) -> list[tuple[str, float, list[Interval]]]:
    """Who holds the floor, turn by turn: (speaker, turn start, their segments in it).

    The first speaker holds it; another speaker's segment of ``FLOOR_S`` or more takes
    it unless the holder talks through it (one of their segments spans it); shorter
    segments are backchannels and never end a turn."""
    turns: list[tuple[str, float, list[Interval]]] = []
    for speaker, start, end in sorted(segments, key=lambda s: (s[1], s[2])):
        if turns and turns[-1][0] == speaker:
            turns[-1][2].append((start, end))
            continue
        holder = turns[-1] if turns else None
        through = holder is not None and any(a <= start and b >= end for a, b in holder[2])
        if holder is None or (end - start >= FLOOR_S and not through):
            turns.append((speaker, start, [(start, end)]))
    return turns


def read_textgrid_words(path: Path, tier: str = "words") -> list[Word]:
    """The non-empty intervals of a Praat TextGrid tier (short or long text format)."""
    tokens = re.findall(r'"((?:[^"]|"")*)"|(-?\d+(?:\.\d+)?)', path.read_text(encoding="utf-8"))
    values = [s.replace('""', '"') if s else n for s, n in tokens]
    words: list[Word] = []
    i = 0
    while i < len(values):
        if values[i] == "IntervalTier" and i + 4 < len(values):
            name, count = values[i + 1], int(float(values[i + 4]))
            rows = values[i + 5 : i + 5 + 3 * count]
            if name == tier:
                for k in range(0, len(rows) - 2, 3):
                    if rows[k + 2].strip():
                        words.append((rows[k + 2].strip(), float(rows[k]), float(rows[k + 1])))
                return words
            i += 5 + 3 * count
        else:
            i += 1
    return words


def _turn_item(
    name: str, channel: Float32Array, spans: list[Interval], begin_s: float, end_s: float,
    reference: str = "", note: str = "",
) -> TurnItem:  # fmt: skip
    """The channel from ``begin_s`` to ``end_s`` with room tone around it."""
    lo, hi = int(max(0.0, begin_s) * SAMPLE_RATE), int(end_s * SAMPLE_RATE)
    audio, lead = _with_tone(channel[lo:hi], channel)
    speech = _shift(clip_to(spans, [(begin_s, end_s)]), lead - lo / SAMPLE_RATE)
    return TurnItem(name, "conversation", audio, intervals(speech), reference, None, note)


def build_conversation(folder: Path) -> list[TurnItem]:
    items: list[TurnItem] = []
    # Meeting headsets: one channel per speaker, every floor turn of each.
    meeting = read_rttm(folder / "ami_es2004_excerpt.rttm")
    for file_id, segments in sorted(meeting.items()):
        for speaker, start, held in floor_turns(segments):
            path = folder / f"ami_es2004_headset_{speaker}.wav"
            if not path.is_file():
                continue
            channel = read_wav(path)
            own = clip_to(frame_intervals(audible_frames(channel)), held)
            name = f"ami-es2004-{speaker}-{start:.1f}s"
            end = held[-1][1] + 0.3
            items.append(_turn_item(name, channel, own, start - 0.3, end, note=file_id))
    # Far-field monologues: the main speaker's turns.
    for file_id, segments in sorted(read_rttm(folder / "ami_trn.rttm").items()):
        path = folder / f"ami_{file_id}.wav"
        if not path.is_file():
            continue
        talk: dict[str, float] = {}
        for speaker, start, end in segments:
            talk[speaker] = talk.get(speaker, 0.0) + end - start
        main = max(talk, key=lambda s: talk[s])
        channel = read_wav(path)
        audible = frame_intervals(audible_frames(channel))
        for speaker, start, held in floor_turns(segments):
            if speaker == main:
                own = clip_to(audible, held)
                end = held[-1][1] + 0.3
                name = f"ami-{file_id}-{start:.1f}s"
                items.append(_turn_item(name, channel, own, start - 0.3, end, note=main))
    # Spontaneous monologues with word timings: one turn each, words as the truth.
    for grid in sorted(folder.glob("mfa_*.TextGrid")):
        words = read_textgrid_words(grid)
        wav = grid.with_suffix(".wav")
        if not words or not wav.is_file():
            continue
        spans = intervals([(s, e) for _, s, e in words])
        reference = normalize_text(" ".join(w for w, _, _ in words if w.lower() not in FILLERS))
        begin, end = spans[0][0] - 0.3, spans[-1][1] + 0.3
        items.append(
            _turn_item(f"mfa-{grid.stem[4:]}", read_wav(wav), spans, begin, end, reference)
        )
    return items


# -- (d) under a background -------------------------------------------------------------


def background(noise: Float32Array, n: int, speech: Float32Array, snr_db: float) -> Float32Array:
    """``n`` samples of ``noise``, looped, ``snr_db`` under ``speech`` (RMS against RMS,
    as the corpus's own mixtures are made)."""
    bed = looped(noise, n)
    speech_rms = float(np.sqrt(np.mean(speech.astype(np.float64) ** 2)))
    noise_rms = float(np.sqrt(np.mean(bed.astype(np.float64) ** 2)))
    return (bed * (speech_rms / max(noise_rms, 1e-9) / 10 ** (snr_db / 20))).astype(np.float32)


def under_noise(item: TurnItem, noise: Float32Array, label: str, snr_db: float) -> TurnItem:
    """``item`` with ``noise`` looped under all of it, ``snr_db`` below its speech (the
    truth's speech intervals). The truth is the clean item's: the background is not the
    user."""
    spans = [item.audio[int(a * SAMPLE_RATE) : int(b * SAMPLE_RATE)] for a, b in item.speech]
    speech = np.concatenate(spans) if spans else item.audio
    bed = background(noise, len(item.audio), speech, snr_db)
    audio = np.clip(item.audio + bed, -1.0, 1.0).astype(np.float32)
    return dataclasses.replace(
        item, name=f"{item.name}-{label}", set=f"{item.set}_noisy", audio=audio,
        note=f"{item.note}; under {label} at {snr_db:g} dB",
    )  # fmt: skip


def build_noisy(
    items: list[TurnItem], noise_dir: Path, snr_db: float = NOISY_SNR_DB
) -> list[TurnItem]:
    """``items``, each under one of :data:`BACKGROUNDS` in turn, shifted by one every
    round, so that a set whose pause lengths also cycle meets every background at
    every length."""
    noises = [read_wav(noise_dir / f"{name}.wav") for name in BACKGROUNDS]
    n = len(BACKGROUNDS)
    out = []
    for i, item in enumerate(items):
        k = (i + i // n) % n
        out.append(under_noise(item, noises[k], BACKGROUNDS[k].split("_", 1)[1], snr_db))
    return out


# -- all sets ----------------------------------------------------------------------------

_CACHE: dict[tuple[str, str], list[TurnItem]] = {}


def read_clips(corpus: Path) -> list[Clip]:
    """Read sentences with a reference, long enough to pause inside."""
    return [
        c
        for c in load_corpus(corpus)
        if c.kind == "speech"
        and c.text
        and c.name.startswith(READ_PREFIXES)
        and c.seconds >= MIN_SENTENCE_S
    ]


def build_set(
    name: str, words_of: WordsOf | None = None, corpus: Path | None = None
) -> list[TurnItem]:
    """One set, built once per process (``words_of`` is only needed for hesitations)."""
    root = corpus or DEFAULT_CORPUS
    key = (name, str(root))
    if key not in _CACHE:
        if name == "hesitation" or name in HELDOUT_AT:
            if words_of is None:
                raise ValueError(f"the {name} set needs word timestamps (words_of)")
            most = HESITATION_ITEMS if name == "hesitation" else None
            _CACHE[key] = build_hesitations(read_clips(root), words_of, most, name)
        elif name == "pairs":
            _CACHE[key] = build_pairs(read_clips(root), _speakers(root))
        elif name == "conversation":
            _CACHE[key] = build_conversation(root / "conversation")
        elif name in NOISY_OF:
            _CACHE[key] = build_noisy(build_set(NOISY_OF[name], words_of, root), root / "noise")
        else:
            known = ", ".join(SETS + EXTRA_SETS)
            raise ValueError(f"unknown turn set {name!r}; known: {known}")
    return _CACHE[key]


def _speakers(corpus: Path) -> dict[str, str]:
    """Clip name -> speaker, from the manifest (pairs need the same voice)."""
    import json

    out = {}
    for line in (corpus / "manifest.jsonl").read_text().splitlines():
        if line.strip():
            item = json.loads(line)
            out[Path(item["file"]).stem] = str(item.get("speaker") or item["file"])
    return out


def whisper_words(model: object) -> WordsOf:
    """Word timestamps from a faster-whisper ``WhisperModel`` (one pass per clip, at set-up;
    the streaming recogniser does not keep word timings)."""

    def words_of(audio: Float32Array) -> list[Word]:
        segments, _ = model.transcribe(  # type: ignore[attr-defined]
            audio, language="en", beam_size=1, word_timestamps=True, vad_filter=False
        )
        return [(w.word, w.start, w.end) for s in segments for w in (s.words or [])]

    return words_of
