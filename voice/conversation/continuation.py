"""One turn, however many pauses: is this speech the rest of the turn just answered?

People pause inside a turn, and some of those pauses look, to every signal, like
its end: a reply starts, and then the user goes on. Answering the rest alone
("see what was happening outside?") and keeping the half-heard reply to half a
sentence in the history is what a user notices. So speech that starts soon
after the user's turn ended, while the reply to it is live and has barely been
heard, is a *candidate continuation*; once it has words (not a backchannel,
not a cough), the session joins it to the turn: the reply stops and leaves the
history, and the listener hears the whole turn again as one. A reply that was
over before the speech began counts the same, by all of it (:class:`Answered`):
one short enough was barely heard however whole it was.

Over a reply heard a little longer (a reader who goes on 1.1 s into it), the first
words are not enough: a "stop" said a second into a reply has read "start." in its
first partial. Such a *late* candidate joins once a partial has three words, or on
its final (a stop phrase stops), and the reply stays paused until then: the user
hears silence either way. What counts is all the reply played before the words: a
reply that resumed in a gap of the user's words-less speech (a mumble Whisper reads
nothing in) was heard then too, and past a second in all, more words decide.

Pure decisions over audio time, no I/O: the session reports what it sees and
asks :meth:`Continuation.previous_of` when words come.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

from voice.conversation.turns import split_words


@dataclass(frozen=True)
class Candidate:
    utterance_id: int  # the new speech
    continues: int  # the utterance whose reply it cuts short
    played_ms: float  # how much of that reply had played when the speech was detected
    pause_ms: float  # from the end of the user's speech to this speech's onset
    heard_ms: float = 0.0  # how much of it had played by the speech's onset

    def heard_by(self, played_ms: float) -> float:
        """How much of the reply the user has heard once ``played_ms`` of it played: what
        had played by the onset, and whatever played since the speech was detected (it
        resumed in a gap of words-less speech, or before its words came)."""
        return self.heard_ms + max(0.0, played_ms - self.played_ms)


@dataclass(frozen=True)
class Heard:
    """A reply whose turn speech may continue, and how much of it the user heard."""

    utterance_id: int  # the turn it answered
    reply_id: int
    heard_ms: float


@dataclass(frozen=True)
class Answered(Heard):
    """A reply that played to its end (``heard_ms``: all of it): speech soon after may
    still be the rest of the turn it answered, when it was short (a one-word
    "Amenities." to "...than his", before "matter"): the user heard all of it, and it
    was barely anything."""

    turn_end_ms: float  # where that turn's speech ended
    user_text: str  # what history keeps of the exchange
    reply_text: str


@dataclass(frozen=True)
class Joined:
    """A turn being heard again with the speech that continued it: the turn as it was
    answered, and what the user had heard of the reply the join took away.

    The join is decided on the continuation's first words, and a first partial can
    mishear a "stop" ("Start."); the whole turn's final then ends in the stop that
    was said. That is a stop, not more of the turn (:meth:`added_words`), and the
    exchange goes back into the history as far as it was heard, as any stop leaves it."""

    user_text: str
    heard_reply: str
    continues: int  # the utterance the turn was first answered as
    reply_id: int  # the reply the join took away (-1: none had started)
    went_on: str = ""  # the continuation's own words, as heard when it joined

    def with_lost_words(self, text: str) -> str:
        """``text``, the whole turn heard again, with the continuation's own words put
        after it where it adds no word to the turn: the pass over the whole turn lost
        them, and without them the turn reads as it did when it was first answered. A
        short last word after a pause goes that way: "...paced up and down, waiting,
        but [0.7 s] he" heard again as "...waiting." (through the real models),
        answered 500 ms into the pause. A pass with words of its own is kept as it is."""
        lost = "" if self.added_words(text) else self.went_on.strip()
        return f"{text.rstrip()} {lost}" if lost else text

    def added_words(self, text: str) -> list[str]:
        """What ``text`` (the whole turn heard again) may have added to the turn, each a
        string of words: those after the last of the turn's own words it shares, in
        order; and, since the pass may reword the turn's last words ("to see." heard
        again as "too,"), that less up to as many leading words as the turn had left
        unshared."""
        before, after = split_words(self.user_text), split_words(text)
        blocks = SequenceMatcher(None, before, after, autojunk=False).get_matching_blocks()
        shared = [block for block in blocks if block.size]
        last = shared[-1] if shared else None
        start = last.b + last.size if last else 0
        unshared = len(before) - (last.a + last.size) if last else len(before)
        added = after[start:]
        return [" ".join(added[k:]) for k in range(min(unshared, len(added) - 1) + 1) if added]


class Continuation:
    def __init__(
        self, enabled: bool, window_ms: int, max_heard_ms: int, late_max_heard_ms: int = 0
    ) -> None:
        """``window_ms``: the longest pause, from the end of the user's speech to their
        next onset, after which speech still continues the turn; ``max_heard_ms``: the
        most of the reply the user may have heard for its first words to merge it away;
        ``late_max_heard_ms``: the most for more words to (0: none)."""
        self.enabled = enabled
        self.window_ms = window_ms
        self.max_heard_ms = max_heard_ms
        self.late_max_heard_ms = late_max_heard_ms
        self.candidate: Candidate | None = None

    def on_speech_start(
        self,
        utterance_id: int,
        onset_ms: float,
        answered: int | None,
        turn_end_ms: float | None,
        heard_ms: float,
        played_ms: float | None = None,
    ) -> None:
        """Speech began at ``onset_ms`` while a reply to utterance ``answered`` (whose
        speech ended at ``turn_end_ms``) was live, ``heard_ms`` of it played by that
        onset (``played_ms`` by now, when the speech is detected, a syllable or two
        later). Replies to no spoken turn (something said, a typed turn: ids under 1)
        continue nothing."""
        self.candidate = None
        if not self.enabled or answered is None or answered < 1 or turn_end_ms is None:
            return
        if onset_ms - turn_end_ms > self.window_ms or heard_ms > max(
            self.max_heard_ms, self.late_max_heard_ms
        ):
            return
        played = heard_ms if played_ms is None else played_ms
        pause = onset_ms - turn_end_ms
        self.candidate = Candidate(utterance_id, answered, played, pause, heard_ms)

    def may_continue(self, utterance_id: int) -> bool:
        """Whether ``utterance_id`` is the candidate continuation (words not heard yet)."""
        candidate = self.candidate
        return candidate is not None and candidate.utterance_id == utterance_id

    def is_late(self, utterance_id: int, played_ms: float | None = None) -> bool:
        """Whether ``utterance_id`` is a late candidate: more words decide it. Its reply
        was heard over ``max_heard_ms`` by the onset, or with ``played_ms`` (how much of
        it has played by now), in all."""
        candidate = self.candidate
        if candidate is None or candidate.utterance_id != utterance_id:
            return False
        heard = candidate.heard_ms if played_ms is None else candidate.heard_by(played_ms)
        return heard > self.max_heard_ms

    def pause_before(self, utterance_id: int) -> float | None:
        """The pause before ``utterance_id`` if it is the candidate continuation."""
        candidate = self.candidate
        if candidate is None or candidate.utterance_id != utterance_id:
            return None
        return candidate.pause_ms

    def previous_of(self, utterance_id: int, played_ms: float | None) -> int | None:
        """The utterance that ``utterance_id`` continues, now that it has words, or None.
        ``played_ms``: how much of the reply has played by now (None: the reply is over,
        heard whole, so there is nothing to merge away). A reply that resumed before the
        words came (in a gap of speech with no words yet) was heard for that long too:
        in all, it may have been heard for the most a late candidate may. Asked once:
        the candidate goes."""
        candidate = self.candidate
        if candidate is None or candidate.utterance_id != utterance_id:
            return None
        self.candidate = None
        most = max(self.max_heard_ms, self.late_max_heard_ms)
        if played_ms is None or candidate.heard_by(played_ms) > most:
            return None
        return candidate.continues

    def forget(self, utterance_id: int) -> None:
        """The utterance ended without words (a cough, an "uh-huh"): not a continuation."""
        if self.candidate is not None and self.candidate.utterance_id == utterance_id:
            self.candidate = None
