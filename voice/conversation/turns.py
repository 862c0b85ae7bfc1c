"""When has the user finished? Adaptive end-of-turn silence from what was said.

A fixed silence timeout is either slow (everyone waits 600 ms for every reply)
or rude (a thinking pause after "and" becomes the end of the turn). We wait
less when the words so far look like a finished turn and longer when they
plainly are not. Two signals, each measured by ``voice bench conversation``:

- The text: a trailing filler ("um"), conjunction ("and"), article, possessive,
  preposition, a pronoun's contracted auxiliary ("it's"), or a trailing comma, means
  more is coming, and so does an auxiliary or a demonstrative ("is", "can", "this")
  that Whisper gave no mark (with one it may be an end: "Yes, we can."); so does a last
  sentence that is only a subordinate clause ("If it rains tomorrow.", "When
  it was the night."): people pause after one before the main clause, and
  Whisper puts a full stop at the pause. A last sentence of only numbers
  ("1. 2.", "555-01": Whisper writes spoken numbers as digits) is someone
  reading out a phone number or a code, or counting, who pauses between the
  groups: a longer wait, though not the unfinished phrase's. A final ".", "?"
  or "!" (Whisper punctuates what it hears as finished) otherwise means it may
  be done; no mark at all means Whisper did not hear an end (a speaker mid-thought
  in conversation): a wait between the two.
- The language model's own end-of-turn probability: the chance it gives the
  chat template's end-of-user-turn token right after the text. It is near zero
  after an unfinished phrase ("What is the capital of") and high after a
  question or a request (0.6 for "What is the capital of France?"), but low
  for many whole statements too (0.04 for "The birch canoe slid on the smooth
  planks."), so it shortens the wait when high and lengthens it only where
  the text has no full stop. It costs one pre-fill that the reply reuses.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from voice.audio.format import FRAME_MS
from voice.listen.agreement import normalize_word
from voice.listen.endpoint import EndpointConfig

# Words after which nobody ends a turn on purpose. A pronoun's contracted auxiliary
# ("it's", "we're", "I'll") is never the last word of a sentence: at an end English
# says it whole ("I know where it is").
CONTINUATION_WORDS = (
    "um uh er erm like and but or so because cause then also plus "
    "the a an my your our their its his whose every very "
    "to of in on at for with from by about into onto over under than as if till until "
    "let's whether which "
    "i'm you're we're they're he's she's it's that's there's here's what's who's "
    "i'll you'll we'll they'll he'll she'll it'll i've you've we've they've "
    "i'd you'd we'd they'd he'd she'd"
)

# Words that end a sentence only when said as an end, which Whisper marks ("That's
# what it is.", "Yes, we can."): the same words with no mark after them are a speaker
# stopping before what the auxiliary or the determiner needs ("so what I'm having is
# [0.8 s] ...", "So this [0.2 s] ...").
OPEN_WORDS = (
    "is are was were am will would can could should must might may been being "
    "this these those some any where"
)

# Hesitation sounds: the speaker holds the floor while searching for words.
FILLERS = "um uh er erm uhm hmm mm"

# Words that open a subordinate clause: a sentence of only that clause wants a main
# one ("If it rains tomorrow, ..."). Prepositions that may open one ("after",
# "before") are left out: "After dinner." is a whole answer.
SUBORDINATORS = "if unless when whenever while because although though since until whereas"

# A group of digits with the marks Whisper puts in and between spoken groups.
NUMBER_GROUP = re.compile(r"[\d.,:;/+()-]*\d[\d.,:;/+()-]*")

INCOMPLETE_PUNCTUATION = (",", "-", "—", "…", "...", ":", ";")
COMPLETE_PUNCTUATION = (".", "?", "!")


@dataclass
class TurnConfig:
    """The ``[turn]`` settings: end-of-turn silences and the signals that pick them."""

    complete_silence_ms: int = 500  # the words look like a finished turn
    # A conjunction or an unfinished phrase: people search for the next word for well
    # over a second ("...out of the [1.5 s] apartment"); 1.2 s cut them off.
    incomplete_silence_ms: int = 2000
    filler_silence_ms: int = 2500  # "um", "uh": the speaker is still searching
    fillers: str = FILLERS  # space-separated
    # A voice held at one pitch this long where the speech stopped is a filler ("uhh")
    # or a drawn-out word ("wooords"), which Whisper does not write: it waits like a
    # filler, whatever the words (voice.listen.pitch). None of the corpus's 128 turn
    # ends, quiet or under music, held it 250 ms (the longest: 180 ms); 6 of 224 pauses
    # did, all fillers and drawn-out words (docs/turn-taking.md). 0: off.
    held_sound_ms: int = 250
    numbers_silence_ms: int = 800  # numbers read out: a phone number, a code, counting
    # Words Whisper ended with no mark at all (no ".", "?", "!", nor ","): it did not hear
    # them end. voice bench turns (docs/turn-taking.md): against the 600 ms of words not
    # judged, conversational cut-ins 6.7 -> 4.0 a minute, mid-turn pauses with a reply
    # 21% -> 10%; 800 ms cut in as often as 1000 ms did and answers the ends Whisper
    # leaves open 200 ms sooner. Under vad.end_silence_ms (0): off.
    unpunctuated_silence_ms: int = 800
    use_text: bool = True
    # The LLM's end-of-turn probability: off by default, measured not to pay on the
    # corpus (voice bench conversation: p50 660 vs 570 ms text only, cut-ins alike).
    use_model: bool = False
    eot_complete: float = 0.02  # probability at or above which a punctuated turn is done
    eot_incomplete: float = 0.005  # below it the model is sure the sentence goes on
    # Judge the words said before the pause, dropping the last words Whisper's word
    # timings put after the speech (listen.unspoken_slack_ms): its completions of an
    # unfinished sentence read as finished.
    use_word_timing: bool = True
    continuation_words: str = CONTINUATION_WORDS  # space-separated
    # Unfinished only where no ".", "?" or "!" follows them; "" turns the rule off.
    open_words: str = OPEN_WORDS  # space-separated
    subordinators: str = SUBORDINATORS  # space-separated; "" turns the clause rule off
    # One turn, however many pauses (voice.conversation.continuation): speech that starts
    # within continue_window_ms of the end of the user's speech, over a reply heard for
    # at most continue_max_heard_ms, joins the turn, which is heard and answered whole.
    continue_turns: bool = True
    continue_window_ms: int = 3000
    # Merged on its first words. At 1500, a "stop" said 1.2 s into a reply, whose first
    # partial read "start.", was merged too, and the merged turn answered.
    continue_max_heard_ms: int = 1000
    # Over that and up to this, it joins once a partial has three words, or on its final
    # (a stop phrase stops): a reader who went on 1.08 s into a reply was answered as a
    # fragment at 1000. The reply stays paused until then. 0: no such joins. 2000: a
    # hesitation of up to 2 s (the range) after finished-looking words (a reply
    # 0.5 s in), heard by the VAD a syllable late; at 1500 a 2.0 s pause heard at
    # 1.54 s of reply was answered as a fragment (voice bench turns --modes late_1500).
    continue_late_max_heard_ms: int = 2000
    # A reply that played to its end counts the same, by all of it, up to
    # continue_max_heard_ms: "Amenities." (0.9 s) to "...than his [2 s] matter" was over
    # when the user went on. False: only speech over a live reply continues the turn.
    continue_after_short_reply: bool = True
    # The speaker's own pace: any shorter wait is raised to pace_percentile of this
    # speaker's pauses inside their speech so far (once pace_min_pauses were seen; at
    # most pace_max_ms). Off by default: measured in docs/turn-taking.md (voice bench
    # turns --modes pace).
    use_pace: bool = False
    pace_percentile: int = 75
    pace_min_pauses: int = 2
    pace_max_ms: int = 1500
    # Patience learned from mistakes: a pause the user went on after, once a reply had
    # started in it (the turn was joined), was not their turn's end. Once that has
    # happened patience_after_joins times, finished-looking words are given the longest
    # such pause and patience_margin_ms (at most patience_max_ms) before the turn ends;
    # the extra over complete_silence_ms halves with each turn answered that the user
    # did not go on after, and the count starts again once it is gone. Pace learns from
    # every pause, this only from the ones the assistant took. One join was measured to
    # cost every joined turn's end half a second; at most 1000 spared no more cut-ins
    # than 800 and cost those turns' ends 200 ms more (docs/turn-taking.md). 0: off.
    patience_max_ms: int = 800
    patience_margin_ms: int = 100
    patience_after_joins: int = 2
    # The user's language (ISO 639-1). The word lists above are English: for any other
    # language only punctuation (Whisper's, "。" and "，" included) and silence judge
    # the turn. Set from [conversation] language (voice.config.with_language).
    language: str = "en"


# Reasons that say "more is coming" on the words alone: taken before the model's opinion.
UNFINISHED = ("incomplete", "cut_off", "held")


@dataclass(frozen=True)
class TurnJudgement:
    silence_ms: int
    # "complete", "incomplete", "cut_off", "held", "filler", "numbers", "unpunctuated"
    # or "unsure"
    reason: str


def judge_turn(
    text: str,
    eot_probability: float | None,
    config: TurnConfig,
    base_ms: int,
    ending_dropped: bool = False,
    cut_off: bool = False,
    held_s: float = 0.0,
) -> TurnJudgement:
    """The silence to wait for after ``text`` before the turn ends (``base_ms`` when
    neither signal says "done" nor "more to come": the ``vad.end_silence_ms``).
    ``ending_dropped``: the last words Whisper wrote, and its last mark, were dropped
    as unspoken, so a missing mark says nothing of what it heard. ``cut_off``: the
    first of them was begun but given too little sound to be said whole
    (``voice.listen.spoken``): the speaker stopped inside a word or a phrase.
    ``held_s``: how long the voice was held at one pitch where it stopped
    (``voice.listen.pitch``); ``turn.held_sound_ms`` of it is a filler, whatever the
    words say."""
    if 0 < config.held_sound_ms <= held_s * 1000.0:
        return TurnJudgement(config.filler_silence_ms, "held")
    if config.use_text and cut_off:
        return TurnJudgement(config.incomplete_silence_ms, "cut_off")
    stripped = text.strip()
    if not stripped:
        return TurnJudgement(base_ms, "unsure")
    if config.language.split("_")[0].lower() not in ("", "en"):
        return _judge_by_marks(stripped, eot_probability, config, base_ms, ending_dropped)
    last = normalize_word(stripped.split()[-1])
    model = eot_probability if config.use_model else None
    asks = stripped.endswith(("?", "!"))  # "What are you looking at?" is finished
    if config.use_text and last in config.fillers.split():
        return TurnJudgement(config.filler_silence_ms, "filler")
    if (
        config.use_text
        and not asks
        and (
            last in config.continuation_words.split()
            or stripped.endswith(INCOMPLETE_PUNCTUATION)
            or _only_a_subordinate_clause(stripped, config.subordinators)
        )
    ):
        return TurnJudgement(config.incomplete_silence_ms, "incomplete")
    if config.use_text and not asks and _reading_out_numbers(_last_sentence(stripped)):
        return TurnJudgement(config.numbers_silence_ms, "numbers")
    punctuated = stripped.endswith(COMPLETE_PUNCTUATION)
    if config.use_text and not punctuated and last in config.open_words.split():
        return TurnJudgement(config.incomplete_silence_ms, "incomplete")
    # The model's "no" only counts where the text has no full stop of its own: it
    # gives statements to an assistant a low probability even when they are whole.
    if model is not None and model < config.eot_incomplete and not punctuated:
        return TurnJudgement(config.incomplete_silence_ms, "incomplete")
    if config.use_text and punctuated and (model is None or model >= config.eot_complete):
        return TurnJudgement(config.complete_silence_ms, "complete")
    if not config.use_text and model is not None and model >= config.eot_complete:
        return TurnJudgement(config.complete_silence_ms, "complete")
    no_yes = model is None or model < config.eot_complete
    open_ended = config.use_text and not punctuated and not ending_dropped
    if open_ended and no_yes and config.unpunctuated_silence_ms > base_ms:
        # Whisper put no mark after the words: it did not hear them end (and the model
        # does not think them done either).
        return TurnJudgement(config.unpunctuated_silence_ms, "unpunctuated")
    return TurnJudgement(base_ms, "unsure")


# Marks after which another language's turn goes on, or is done (full-width too).
_MARKS_GOING_ON = (*INCOMPLETE_PUNCTUATION, "，", "、", "：", "；", "…")
_MARKS_DONE = (*COMPLETE_PUNCTUATION, "。", "？", "！", "」", "』")


def _judge_by_marks(
    text: str,
    eot_probability: float | None,
    config: TurnConfig,
    base_ms: int,
    ending_dropped: bool,
) -> TurnJudgement:
    """A turn in a language without word lists here: what Whisper's punctuation says,
    the model's opinion where it is on, else silence alone."""
    model = eot_probability if config.use_model else None
    if config.use_text and text.endswith(_MARKS_GOING_ON):
        return TurnJudgement(config.incomplete_silence_ms, "incomplete")
    punctuated = text.endswith(_MARKS_DONE)
    if config.use_text and punctuated and (model is None or model >= config.eot_complete):
        return TurnJudgement(config.complete_silence_ms, "complete")
    if model is not None and model >= config.eot_complete:
        return TurnJudgement(config.complete_silence_ms, "complete")
    open_ended = config.use_text and not punctuated and not ending_dropped
    if open_ended and config.unpunctuated_silence_ms > base_ms:
        return TurnJudgement(config.unpunctuated_silence_ms, "unpunctuated")
    return TurnJudgement(base_ms, "unsure")


def _only_a_subordinate_clause(text: str, subordinators: str) -> bool:
    """Whether the last sentence opens with a subordinator and has no second clause
    (no comma, semicolon or dash), like "If it rains tomorrow." """
    last_sentence = _last_sentence(text)
    words = last_sentence.split()
    if not words or normalize_word(words[0]) not in subordinators.split():
        return False
    return not any(mark in last_sentence[:-1] for mark in (",", ";", ":", " -", "—"))


def _reading_out_numbers(sentence: str) -> bool:
    """Whether a sentence is only numbers ("1. 2.", "2020.") or ends in two groups or
    more ("The code is 4 5 6.", "Call 555, 1234."); not "Set a timer for 10." """
    words = sentence.split()
    trailing = 0
    for word in reversed(words):
        if not NUMBER_GROUP.fullmatch(word):
            break
        trailing += 1
    return trailing > 0 and (trailing == len(words) or trailing >= 2)


def _last_sentence(text: str) -> str:
    sentences = [p for p in re.split(r"(?<=[.?!])\s+", text) if p.strip()]
    return sentences[-1] if sentences else ""


def same_turn_text(a: str, b: str) -> bool:
    """Whether two transcripts say the same words (case and punctuation aside)."""
    return split_words(a) == split_words(b)


def split_words(text: str) -> list[str]:
    """Normalised words: lower case, no punctuation ("Uh-huh." -> "uh-huh")."""
    words = (normalize_word(t) for t in re.split(r"\s+", text))
    return [w for w in words if any(c.isalnum() for c in w)]


PACE_PAUSE_MS = 200  # a silence this long inside the speech is one of the speaker's pauses
PACE_PAUSES_KEPT = 30  # the speaker's recent pauses that set their pace


class EndOfTurn:
    """Sets the listener's end-of-turn silence for the utterance being spoken.

    ``config`` is the listener's own endpoint settings (the session's copy): its
    ``end_silence_ms`` is changed between frames. Until a pause's words are judged
    the turn may not end before the longest wait: the judgement (one recognition
    pass) normally comes long before, and ending on the default while it is pending
    cuts users off.

    With ``turn.use_pace`` it also keeps the speaker's pauses (``observe_pause``): a
    speaker who pauses for 900 ms between clauses has not finished after 500 ms of
    silence, whatever the words look like.

    And it learns from its mistakes (``observe_joined_pause``): pauses the assistant
    took for the end, and the user went on after, say this speaker pauses that long
    inside a turn. Once that is a habit (two such pauses by default, not one: a single
    one cost every joined turn's end half a second and spared no cut-in on read
    speech), their finished-looking words wait that long too, the way a person who has
    spoken over someone twice gives them more time, and relax again as their turns end
    where they seemed to (``turn_answered``).
    """

    def __init__(self, config: EndpointConfig, turn: TurnConfig, model_available: bool) -> None:
        """``model_available``: the LLM's end-of-turn probability is on and will come."""
        self.config = config
        self.turn = turn
        self.base_ms = config.end_silence_ms
        self.model_available = model_available
        self._used: dict[int, int] = {}  # utterance id -> the silence its turn ended on
        self._pauses: deque[int] = deque(maxlen=PACE_PAUSES_KEPT)
        self._learned_ms = 0  # the least wait after any words, learned from joins
        self._joins = 0  # ... from this many of them
        # Both before the join that taught them last, and its utterance: a stop misheard
        # as more of the turn undoes that join, and only that one.
        self._before_join: tuple[int, int, int] | None = None

    def await_judgement(self) -> None:
        """Speech (re)started: nothing is judged yet."""
        adaptive = self.turn.use_text or self.model_available
        longest = max(self.turn.incomplete_silence_ms, self.turn.filler_silence_ms)
        wait = max(longest, self.base_ms) if adaptive else self.base_ms
        self.config.end_silence_ms = wait

    def judge(
        self,
        utterance_id: int,
        text: str,
        eot_probability: float | None,
        model_coming: bool = False,
        ending_dropped: bool = False,
        cut_off: bool = False,
        held_s: float = 0.0,
    ) -> None:
        """The words of the pause, and the model's opinion once it has one.

        ``model_coming``: the model's opinion of these words is on its way and may
        still say "not finished", so only "incomplete" is taken before it. Where none
        will come (no reply was prepared for the words, or asking failed), the words
        are judged alone: waiting for it would hold the turn to the longest silence.
        ``ending_dropped``, ``cut_off``, ``held_s``: see :func:`judge_turn`.
        """
        judged = judge_turn(
            text, eot_probability, self.turn, self.base_ms, ending_dropped, cut_off, held_s
        )
        if model_coming and eot_probability is None and judged.reason not in UNFINISHED:
            return
        silence = max(judged.silence_ms, self.pace_ms() or 0, self.patience_ms)
        self.config.end_silence_ms = silence
        self._used[utterance_id] = silence

    def observe_pause(self, silence_ms: int) -> None:
        """The user went on after ``silence_ms`` of silence inside their speech (a pause
        the turn did not end on, or one a continuation joined over)."""
        if silence_ms >= PACE_PAUSE_MS:
            self._pauses.append(silence_ms)

    def observe_joined_pause(self, utterance_id: int, pause_ms: int) -> None:
        """A reply started in a pause of ``pause_ms`` and the user went on after it (in
        utterance ``utterance_id``, joined to the turn): the turn had not ended, and the
        pause was one of theirs (``observe_pause``). Once this has happened
        ``turn.patience_after_joins`` times, their words wait at least the longest such
        pause and the margin, up to ``turn.patience_max_ms``."""
        self.observe_pause(pause_ms)
        most = self.turn.patience_max_ms
        if most > 0:
            self._before_join = (utterance_id, self._learned_ms, self._joins)
            self._joins += 1
            learned = pause_ms + self.turn.patience_margin_ms
            self._learned_ms = min(most, max(self._learned_ms, learned))

    def forget_join(self, utterance_id: int) -> None:
        """The join of ``utterance_id`` was a "stop" misheard as more of the turn: what it
        taught goes (nothing, if it taught nothing: no pause was known, or another join
        has taught since)."""
        if self._before_join is not None and self._before_join[0] == utterance_id:
            _, self._learned_ms, self._joins = self._before_join
            self._before_join = None

    def turn_answered(self) -> None:
        """A turn that did not continue one the assistant took too soon is answered: the
        learned patience's extra over the finished-turn wait halves, and once it is gone
        (under a frame) the joins are counted from none again."""
        extra = (self._learned_ms - self.turn.complete_silence_ms) // 2
        if extra >= FRAME_MS:
            self._learned_ms = self.turn.complete_silence_ms + extra
        else:
            self._learned_ms = self._joins = 0

    def forget_speaker(self) -> None:
        """Someone else speaks now (a kiosk's next visitor: ``Session.reset``): how the
        last speaker paused, their pace and the patience they taught, is not theirs."""
        self._pauses.clear()
        self._learned_ms = self._joins = 0
        self._before_join = None

    @property
    def patience_ms(self) -> int:
        """The least wait after any words, learned from the turns joined (0: none, or
        not yet joined often enough to be this speaker's habit)."""
        return self._learned_ms if self._joins >= self.turn.patience_after_joins else 0

    def pace_ms(self) -> int | None:
        """The silence this speaker's own pauses ask for (None: pace off, or too few
        pauses seen to know it)."""
        if not self.turn.use_pace or len(self._pauses) < self.turn.pace_min_pauses:
            return None
        ordered = sorted(self._pauses)
        rank = min(len(ordered) - 1, len(ordered) * self.turn.pace_percentile // 100)
        return min(self.turn.pace_max_ms, ordered[rank])

    def silence_used(self, utterance_id: int) -> int:
        """The end-of-turn silence an ended utterance was given (forgets it)."""
        return self._used.pop(utterance_id, self.base_ms)
