"""The reply guard on scripted token streams: the sentence cap, the length cap, and
the loop and repeat stops, as the session and the reply pipeline feed it."""

from __future__ import annotations

import re

from voice.reply.guard import (
    ReplyGuard,
    ReplyLimits,
    has_loop,
    repeated_ngram,
    split_sentences,
    spoken_chars,
    words_of,
)
from voice.speak.chunking import SentenceChunker


def tokens(text: str) -> list[str]:
    """Roughly how an LLM streams: a word with its leading space, punctuation apart."""
    return re.findall(r" ?[\w']+|[^\w\s]|\s+", text)


def run(text: str, limits: ReplyLimits, first_chunk_max_chars: int = 24) -> tuple[ReplyGuard, int]:
    """Feed ``text`` token by token; return the guard and how many tokens it took."""
    guard = ReplyGuard(SentenceChunker(first_chunk_max_chars=first_chunk_max_chars), limits)
    spoken: list[str] = []
    used = 0
    for token in tokens(text):
        used += 1
        spoken += guard.push(token)
        if guard.stopped:
            break
    else:
        spoken += guard.flush()
    assert "".join(spoken) == guard.text  # what was handed out is what it says it said
    return guard, used


def test_the_reply_ends_after_the_sentence_cap_and_generation_stops() -> None:
    text = "Paris is the capital. It is in France. It has a big tower. I like it."
    guard, used = run(text, ReplyLimits(max_sentences=2))
    assert guard.text.strip() == "Paris is the capital. It is in France."
    assert guard.reason == "sentences"
    # It stops at the end of the second sentence (one token on: the space that proves it).
    assert used <= len(tokens("Paris is the capital. It is in France. It")) + 1


def test_one_sentence_cap_and_no_cap() -> None:
    text = "Sure, I can help with that. It is a lovely day for it. Anything else?"
    assert run(text, ReplyLimits(max_sentences=1))[0].text.strip() == "Sure, I can help with that."
    guard, _ = run(text, ReplyLimits())
    assert guard.text == text and guard.reason is None


def test_the_length_cap_ends_at_the_last_sentence_boundary() -> None:
    text = "The sun is a star. It is about one hundred and fifty million kilometres away."
    guard, _ = run(text, ReplyLimits(max_sentences=5, max_chars=40))
    assert guard.text.strip() == "The sun is a star."
    assert guard.reason == "length"


def test_the_length_cap_counts_numbers_as_they_are_read() -> None:
    """Digits are read as words: a list of figures is long speech in few characters."""
    assert spoken_chars("Hello there.") == len("Hello there.")
    said = "fourteen minutes and twenty-eight seconds"
    assert abs(spoken_chars("14 minutes and 28 seconds") - len(said)) <= 6
    assert abs(spoken_chars("1.5") - len("one point five")) <= 6
    text = "It takes 1.5 hours. Then 14 minutes, 28 seconds and 45 minutes more. Bye."
    limits = ReplyLimits(max_sentences=5, max_chars=len(text))
    guard, _ = run(text, limits)  # written, it fits; spoken, it does not
    assert guard.text.strip() == "It takes 1.5 hours."
    assert guard.reason == "length"


def test_one_run_on_sentence_ends_at_the_length_cap() -> None:
    text = "I think that " + "we could go and look at the river and then " * 10 + "home."
    guard, _ = run(text, ReplyLimits(max_chars=80))
    assert guard.reason == "length"
    assert 40 <= len(guard.text) <= 120


def test_a_repeated_sentence_is_a_loop_and_is_never_spoken() -> None:
    text = "You're right, I'm not a tester. You're right, I'm not a tester. You're right."
    guard, _ = run(text, ReplyLimits(max_sentences=5, ngram=8))
    assert guard.text.strip() == "You're right, I'm not a tester."
    assert guard.reason == "loop"


def test_a_sentence_of_a_recent_reply_is_not_said_again_even_as_the_first() -> None:
    recent = ("You're right, I'm not a tester.",)
    text = "You're right, I'm not a tester. I can help you plan your day."
    guard, _ = run(text, ReplyLimits(max_sentences=5, recent=recent))
    assert guard.text == "I can help you plan your day."  # held while it matched, skipped
    text = "Sure, I can help you plan it. You're right, I'm not a tester. Bye."
    guard, _ = run(text, ReplyLimits(max_sentences=5, recent=recent))
    assert guard.text.strip() == "Sure, I can help you plan it."
    assert guard.reason == "repeat"


def test_a_reply_of_which_nothing_may_be_said_says_the_fallback_once() -> None:
    """Silence is no answer: a reply that only repeats an earlier one, or stutters,
    says the fallback; one that said anything of its own does not."""
    recent = ("A spider has eight legs and two eyes.",)
    limits = ReplyLimits(max_sentences=2, ngram=6, recent=recent, fallback="Sorry, I'm not sure.")
    guard, _ = run("A spider has eight legs and two eyes.", limits)
    assert guard.text == "Sorry, I'm not sure."
    guard, _ = run("No, no, no, no, no, no.", limits)
    assert guard.text == "Sorry, I'm not sure." and guard.reason == "loop"
    guard, _ = run("An insect has six. A spider has eight legs and two eyes.", limits)
    assert guard.text.strip() == "An insect has six." and guard.reason == "repeat"
    silent = ReplyLimits(max_sentences=2, ngram=6, recent=recent)
    assert run("A spider has eight legs and two eyes.", silent)[0].text == ""


def test_a_stutter_is_a_loop() -> None:
    guard, _ = run("L'Alma: No, no, no, no, no, no, no, no.", ReplyLimits(ngram=6))
    assert guard.reason == "loop"
    assert guard.text.lower().count("no") < 4


def test_text_that_only_starts_like_a_recent_sentence_is_released_whole() -> None:
    recent = ("Right, I'm not a tester.",)
    text = "Right, I'm not a doctor either. Ask one."
    guard, _ = run(text, ReplyLimits(max_sentences=5, recent=recent))
    assert guard.text == text and guard.reason is None


def test_a_repeated_run_of_words_inside_a_sentence_is_a_loop() -> None:
    text = "The best way is to go to the shop and buy milk and go to the shop and buy milk and"
    guard, _ = run(text, ReplyLimits(ngram=5))
    assert guard.reason == "loop"
    assert "buy milk and go to the shop and buy" not in guard.text


def test_the_first_chunk_is_not_held_back() -> None:
    """First audio is not delayed: the first clause comes out as soon as the chunker
    hands it out, with every limit on."""
    limits = ReplyLimits(
        max_sentences=2, max_chars=120, ngram=5, recent=("Something else entirely said.",)
    )
    guard = ReplyGuard(SentenceChunker(first_chunk_max_chars=24), limits)
    plain = SentenceChunker(first_chunk_max_chars=24)
    text = "Well, the capital of France is Paris, a city on the Seine."
    for token in tokens(text):
        assert guard.push(token) == plain.push(token)


def test_short_sentences_may_recur() -> None:
    text = "Sure. Paris is the capital of France. Sure."
    guard, _ = run(text, ReplyLimits(max_sentences=5, ngram=5))
    assert guard.text == text


def test_detectors() -> None:
    assert words_of("You’re RIGHT!") == ["you're", "right"]
    assert repeated_ngram(["a", "b", "c", "a", "b", "c"], 3) == 5
    assert repeated_ngram(["a", "b", "c", "d", "a", "b"], 3) is None
    assert repeated_ngram(["the", "the", "the", "the", "the", "the"], 5) == 3  # a stutter
    assert split_sentences("Dr. Smith is in. Come at 10.30 please! Ok?") == [
        "Dr. Smith is in.",
        "Come at 10.30 please!",
        "Ok?",
    ]
    assert has_loop("Yes, sure. Yes, sure.", ngram=0) is False  # two words: not a loop
    assert has_loop("I am a nurse. I am a nurse.", ngram=0)  # three or more: a loop
    assert has_loop("I am here right now. I am here right now.", ngram=0)
    assert repeated_ngram(["no", "no", "no", "no"], 6) == 3
    assert has_loop("one two three four five and one two three four five", ngram=5)
    assert not has_loop("Paris is the capital of France. It has a big tower.", ngram=5)


def test_a_generation_cut_at_the_cap_speaks_and_keeps_only_its_sentences() -> None:
    """The session's side: a Generation with a History's prompt stops at the cap, the
    model may be closed, and what history gets is what will be spoken."""
    from voice.conversation.generation import Generation
    from voice.reply.history import History

    history = History(
        "Be brief.",
        2048,
        100,
        lambda ms: sum(len(m.content) for m in ms),
        ReplyLimits(max_sentences=2),
        repeat_window=3,
    )
    gen = Generation(1, 1, "hi", history.prompt_for("hi"), False, SentenceChunker(), 0.0)
    text = "Hello there. I am fine. I like long walks. And tea."
    shown = ""
    for token in tokens(text):
        shown += gen.add_delta(token, 0.0)
        if gen.stopped_early:
            break
    assert gen.stopped_early and gen.llm_done
    assert gen.text.strip() == shown.strip() == "Hello there. I am fine."
    assert "".join(gen.pending_chunks).strip() == gen.text.strip()
    history.add_turn("hi", gen.text.strip())
    assert history.prompt_for("and?").limits.recent == ("Hello there. I am fine.",)


def test_seeds_are_per_conversation_and_turn() -> None:
    from voice.reply.history import History

    def count(ms: list) -> int:  # type: ignore[type-arg]
        return 1

    a, b = History("s", 100, 10, count, seed=1), History("s", 100, 10, count, seed=2)
    assert a.prompt_for("x").seed != b.prompt_for("x").seed
    assert a.prompt_for("x").seed == History("s", 100, 10, count, seed=1).prompt_for("x").seed
    first = a.prompt_for("x").seed
    a.add_turn("x", "y")
    assert a.prompt_for("x").seed != first
    assert History("s", 100, 10, count).seed != History("s", 100, 10, count).seed


def test_the_history_budget_keeps_the_latest_turns() -> None:
    from voice.reply.history import History

    def count(ms: list) -> int:  # type: ignore[type-arg]
        return sum(len(m.content.split()) + 1 for m in ms)

    history = History("s", 1000, 10, count, history_tokens=14)  # two turns
    for i in range(10):
        history.add_turn(f"question {i}", f"answer number {i}")
    prompt = history.prompt_for("new")
    assert [m.content for m in prompt[1:]] == [
        "question 8",
        "answer number 8",
        "question 9",
        "answer number 9",
        "new",
    ]


def test_a_reply_of_which_nothing_was_said_does_not_seed_the_next() -> None:
    from voice.reply.history import History

    history = History("s", 100, 10, lambda ms: 1)
    history.add_turn("hi", "")
    assert history.turns == []


def test_a_later_sentence_is_said_whole_or_not_at_all() -> None:
    """The length cap never cuts a second sentence mid-clause, however the chunker
    splits it: it is held until it ends, then said whole, or dropped if it overruns."""
    first = "You've got a lot of potential, my friend."
    long_second = " What kind of potion would you like, and for which of your many wounds today?"
    guard, _ = run(first + long_second, ReplyLimits(max_sentences=3, max_chars=80))
    assert guard.text.strip() == first and guard.reason == "length"
    short_second = " What kind, then?"
    guard, _ = run(first + short_second, ReplyLimits(max_sentences=3, max_chars=80))
    assert guard.text == first + short_second


def test_a_run_on_first_sentence_ends_at_a_clause_not_inside_a_phrase() -> None:
    """Past the cap, the first sentence ends at a clause boundary: a forced split in a
    phrase without punctuation ("the ticket counter with a") is finished first."""
    text = "In the museum gift shop just look for the ticket counter with a big sign above it."
    guard, _ = run(text, ReplyLimits(max_sentences=1, max_chars=60))
    assert guard.text.strip() == text  # no clause boundary: the whole (short) sentence
    text = "The hall is on the seventh floor, the largest is the canyon, the rest is closed."
    guard, _ = run(text, ReplyLimits(max_sentences=1, max_chars=45))
    assert guard.text.rstrip().endswith(",") and guard.reason == "length"


def test_a_first_chunk_held_as_a_possible_repeat_comes_out_as_the_chunker_cut_it() -> None:
    """A reply that starts like a recent sentence is held until its sentence ends; then
    its chunks come out as the chunker cut them, so the first audio waits for the short
    first chunk's synthesis, not the whole sentence's."""
    recent = ("That's a wonderful idea for a party.",)
    limits = ReplyLimits(max_sentences=2, max_chars=120, ngram=5, recent=recent)
    text = "That's a wonderful way to end on a positive note. Thanks."
    guard = ReplyGuard(SentenceChunker(first_chunk_max_chars=16), limits)
    plain = SentenceChunker(first_chunk_max_chars=16)
    held: list[str] = []
    expected: list[str] = []
    for token in tokens(text):
        held += guard.push(token)
        expected += plain.push(token)
        if "note." not in "".join(expected):
            assert held == []  # still held: it might be the recent sentence again
    held += guard.flush()
    expected += plain.flush()
    assert held == expected and len(held) >= 3
