"""The voice's pitch, frame by frame, and how long it was held level where the speech
stopped: a filler ("uhh") or a drawn-out word ("wooords") before a pause.

Whisper leaves fillers out of its text (tiny.en wrote none before any pause of the
corpus), so the end-of-turn judgement never saw the "uh" that people say when they
are looking for the next word: the cold monologue's "...in the original one. uh
[1.33 s] and" was heard as "...in the original one." and answered. But a filler
sounds like nothing else at a pause: one vowel held at one pitch for a quarter of a
second or more. Studies of turn-taking name it (and a slowed, drawn-out last word)
as a cue that the speaker holds the floor; a turn's own end is a short last syllable
whose pitch moves, most often down. Measured at every pause and end of the turn sets
(``voice bench eot``, docs/turn-taking.md): a level stretch of 250 ms or more ends none
of their 82 turn ends, read or spontaneous, quiet or under music, and 6 of 230 pauses,
5 of them among the 67 conversational ones. An "um" is missed: the murmur of its "m"
falls in pitch.

The pitch tracker is a plain YIN (de Cheveigne and Kawahara, 2002): the cumulative-
mean-normalised difference function of each 25 ms window, its first dip under a
threshold taken as the period. It is written from the paper with numpy, every frame
at once: about 3 ms of one core for a second of audio, and the held sound reads only
the last second.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE, Float32Array

FloatArray = npt.NDArray[np.float64]

HOP_S = 0.01
WINDOW_SAMPLES = 400  # 25 ms: two periods of a 80 Hz voice
LOWEST_HZ = 60.0
HIGHEST_HZ = 400.0
DIP = 0.2  # YIN's threshold on the normalised difference: under it, a period
QUIET_DB = -35.0  # frames this far under the loud frames of the context are not voice
SILENT_DB = -60.0  # nor is anything under this (full scale 0 dB): digital silence has no pitch

# The held sound is read from the last HELD_READ_S of the speech. Its last voiced frame
# must lie in the last HELD_FINAL_S: a drawn-out word may end in a long voiceless
# consonant (the "s" of a held "wooords" took 0.46 s in the corpus), and the speech's
# end is known to about 100 ms. It runs back while the pitch stays within HELD_PITCH_ST
# of the final pitch (a held vowel wavers by less than a semitone; a word's syllables
# move by more), and the voice drops out for no more than HELD_GAP_FRAMES frames (a
# creak, a tracking miss).
HELD_READ_S = 1.0
HELD_FINAL_S = 0.6
HELD_PITCH_ST = 1.0
HELD_GAP_FRAMES = 2
HELD_FINAL_FRAMES = 5  # the final pitch: the median of the last this many voiced frames


def pitch_track(audio: Float32Array) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(frame start seconds, pitch in Hz or NaN where unvoiced, level in dB) every
    ``HOP_S``."""
    hop = int(HOP_S * SAMPLE_RATE)
    longest = int(SAMPLE_RATE / LOWEST_HZ)
    shortest = int(SAMPLE_RATE / HIGHEST_HZ)
    span = WINDOW_SAMPLES + longest
    samples = np.asarray(audio, dtype=np.float64)
    count = max(0, (len(samples) - span) // hop + 1)
    if count == 0:
        empty = np.zeros(0)
        return empty, empty, empty
    index = np.arange(count)[:, None] * hop + np.arange(span)[None, :]
    frames = samples[index]
    window = frames[:, :WINDOW_SAMPLES]
    size = 1 << int(np.ceil(np.log2(span + WINDOW_SAMPLES)))
    spectrum = np.fft.rfft(frames, size) * np.conj(np.fft.rfft(window, size))
    correlation = np.fft.irfft(spectrum, size)[:, : longest + 1]
    squares = np.cumsum(np.pad(frames**2, ((0, 0), (1, 0))), axis=1)
    lags = np.arange(longest + 1)
    energy_at_lag = squares[:, lags + WINDOW_SAMPLES] - squares[:, lags]
    difference = energy_at_lag[:, :1] + energy_at_lag - 2.0 * correlation
    difference[:, 0] = 0.0
    running = np.cumsum(difference[:, 1:], axis=1)
    normalised = np.ones_like(difference)
    normalised[:, 1:] = difference[:, 1:] * lags[1:] / np.maximum(running, 1e-12)
    # The level of what varies: a constant offset (a stuck input, a test's flat "tone")
    # is no sound, and its difference function, zero at every lag, would read as a pitch.
    level = 10.0 * np.log10(np.var(window, axis=1) + 1e-12)
    search = normalised[:, shortest : longest + 1]
    under = search < DIP
    first = np.argmax(under, axis=1)  # each frame's first lag under the threshold
    # Then down to the bottom of that dip: the first lag from there on whose next lag
    # is no lower (or the last lag).
    rising = np.ones_like(under)
    rising[:, :-1] = search[:, 1:] >= search[:, :-1]
    rising &= np.arange(search.shape[1])[None, :] >= first[:, None]
    bottom = np.argmax(rising, axis=1)
    pitch = np.where(under.any(axis=1), SAMPLE_RATE / (bottom + shortest), np.nan)
    loud = float(np.percentile(level, 90))
    pitch[(level < loud + QUIET_DB) | (level < SILENT_DB)] = np.nan
    times: FloatArray = np.arange(count, dtype=np.float64) * HOP_S
    return times, pitch, np.asarray(level, dtype=np.float64)


def held_sound_s(speech: Float32Array, after: Float32Array | None = None) -> float:
    """How long the voice was held at one pitch where ``speech`` stops (it ends where the
    speaker stopped): 0.0 where the last of it is unvoiced, or moves in pitch.

    ``after``: the audio that followed the stop (a pass runs ``listen.final_tail_ms``
    on). Where a pitch goes on in most of it, the stop was not heard as silence: music
    or a voice in the room, whose held note is no filler (jazz under a read sentence
    held its last "...counselled him" 2.5 s before this). 0.0 then."""
    heard = speech[-int(HELD_READ_S * SAMPLE_RATE) :]
    tail = np.zeros(0, dtype=np.float32) if after is None else after
    times, pitch, _ = pitch_track(np.concatenate([heard, tail]))
    voiced = ~np.isnan(pitch)
    end_s = len(heard) / SAMPLE_RATE
    past = times >= end_s  # frames that read only what came after the stop
    if past.any() and voiced[past].mean() > 0.5:
        return 0.0
    centres = times + WINDOW_SAMPLES / 2 / SAMPLE_RATE
    before = voiced & (times + WINDOW_SAMPLES / SAMPLE_RATE <= end_s + 1e-9)
    last = np.flatnonzero(before & (centres >= end_s - HELD_FINAL_S))
    if last.size == 0:
        return 0.0
    semitones = 12.0 * np.log2(pitch[last[-1]] / pitch)  # NaN where unvoiced
    final = float(np.median(semitones[last[-HELD_FINAL_FRAMES:]]))
    first, gap = int(last[-1]), 0
    for frame in range(int(last[-1]), -1, -1):
        if not voiced[frame]:
            gap += 1
            if gap > HELD_GAP_FRAMES:
                break
            continue
        if abs(semitones[frame] - final) > HELD_PITCH_ST:
            break
        first, gap = frame, 0
    return float(centres[last[-1]] - centres[first])
