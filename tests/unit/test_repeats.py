"""The listener's repeat rules (voice.reply.repeats) on labelled sentence pairs, and the
reply guard holding and dropping near-copies, recurring clauses and openings.

The pairs are our own examples, written to the shapes seen in `voice simulate` runs
(a word swapped, a clause that ends reply after reply, a shared opening) and to the
shapes a kiosk or a game character says legitimately twice in a row (the same template
with another fact). The threshold test shows why 0.8 and not 0.7 or 0.9.
"""

from __future__ import annotations

import re

from voice.reply.guard import ReplyGuard, ReplyLimits
from voice.reply.history import History
from voice.reply.repeats import (
    NEAR_COPY,
    SaidLately,
    clauses_of,
    common_words,
    may_become,
    near_copy,
    same_question,
    words_of,
)
from voice.speak.chunking import SentenceChunker

# A listener hears each of these as the assistant saying the same thing again.
SAME = [
    (
        "That's just one example of the AI's ability to make up their own stories.",
        "That's just another example of the AI's ability to make up their own stories.",
    ),
    (
        "Another engineer who was about to make a mistake.",
        "Another one who was about to make a mistake.",
    ),
    ("You're safe now.", "You're safe now!"),
    ("I can't wait to see you there.", "I can't wait to see you again."),
    ("The museum is a wonderful place to visit.", "The museum is a wonderful place to explore."),
    ("Let me know if you need anything else.", "Let me know if you need something else."),
    ("It was a pleasure talking to you today.", "It was a pleasure talking with you today."),
    ("I hope you have a wonderful day.", "I hope you have a great day."),
]
# ... and each of these as two different things said.
DIFFERENT = [
    ("The cafe is on the ground floor.", "The shop is on the first floor."),
    ("The museum opens at nine.", "The museum closes at five."),
    ("Would you like to buy a sword?", "Would you like to buy a shield instead?"),
    ("I sell swords for ten gold.", "I sell axes for twelve gold."),
    ("The gate is open now.", "The potion is yours now."),
    ("You're welcome.", "You're right."),
    ("Paris is the capital of France.", "Madrid is the capital city of Spain."),
    ("The dragon lives in the northern hills.", "The miller lives by the river."),
]


def test_near_copies_are_told_from_different_sentences_at_the_chosen_threshold() -> None:
    for a, b in SAME:
        assert near_copy(words_of(a), words_of(b)), (a, b)
    for a, b in DIFFERENT:
        assert not near_copy(words_of(a), words_of(b)), (a, b)


def test_the_threshold_is_where_both_lists_are_right() -> None:
    """0.7 takes a different answer for a copy; 0.9 lets a one-word change pass."""

    def errors(threshold: float) -> int:
        missed = sum(not near_copy(words_of(a), words_of(b), threshold) for a, b in SAME)
        false = sum(near_copy(words_of(a), words_of(b), threshold) for a, b in DIFFERENT)
        return missed + false

    assert errors(NEAR_COPY) == 0
    assert errors(0.7) > 0 and errors(0.9) > 0


def test_common_words_and_clauses() -> None:
    assert common_words(["a", "b", "c", "d"], ["a", "x", "c", "d"]) == 3
    assert common_words([], ["a"]) == 0
    assert clauses_of("Well, I'm sorry for the error.") == [
        ("well",),
        ("i'm", "sorry", "for", "the", "error"),
    ]
    assert may_become(words_of("I'm sorry"), words_of("I'm sorry for the error"))
    assert not may_become(words_of("The shop"), words_of("The cafe is on the ground floor"))
    # From the third word on, one word may differ while the sentence is still coming.
    assert may_become(words_of("That's just another"), words_of("That's just one example of"))


def test_what_was_said_lately_is_judged_by_sentence_clause_and_opening() -> None:
    said = SaidLately.of(
        [
            "You're safe now. The storm has passed.",
            "We found the key, I'm sorry for the error.",
            "That's just one example of the AI's ability to make up stories.",
        ]
    )
    assert said.repeats("You're safe now.")  # three words, said before
    assert said.repeats("The storm has passed!")
    assert said.repeats("Here it is, I'm sorry for the error.")  # a clause of five words
    assert not said.repeats("Thank you.")  # two words may recur
    opening = "That's just another example of the way stories grow."
    assert said.repeats(opening, first=True)  # the previous reply's opening
    assert not said.repeats(opening, first=False)  # not as a later sentence
    assert said.may_repeat("That's just another example of", first=True)
    assert not said.may_repeat("Sure,", first=True)


def tokens(text: str) -> list[str]:
    return re.findall(r" ?[\w']+|[^\w\s]|\s+", text)


def run(text: str, limits: ReplyLimits) -> ReplyGuard:
    guard = ReplyGuard(SentenceChunker(first_chunk_max_chars=24), limits)
    out: list[str] = []
    for token in tokens(text):
        out += guard.push(token)
        if guard.stopped:
            break
    else:
        out += guard.flush()
    assert "".join(out) == guard.text
    return guard


def test_the_guard_drops_a_near_copy_a_recurring_clause_and_a_copied_opening() -> None:
    fallback = "Sorry, I'm not sure."
    limits = ReplyLimits(max_sentences=3, ngram=6, fallback=fallback)
    recent = ("No, no, no! Another engineer who was about to make a mistake.",)
    text = "No, no, no! Another one who was about to make a mistake."
    guard = run(text, limits_with(limits, recent))
    assert guard.text == fallback  # both sentences repeat: nothing of its own to say
    recent = ("We looked everywhere, I'm sorry for the error.",)
    text = "The key is in the hall. Well, I'm sorry for the error."
    guard = run(text, limits_with(limits, recent))
    assert guard.text.strip() == "The key is in the hall." and guard.reason == "repeat"
    recent = ("That's just one example of the AI's ability to make up their own stories.",)
    text = "That's just another example of the way tales grow. The gate is open."
    guard = run(text, limits_with(limits, recent))
    assert guard.text.strip() == "The gate is open."  # the copied opening was skipped
    guard = run("You're safe now. The storm is over. You're safe now!", limits)
    assert guard.text.strip() == "You're safe now. The storm is over." and guard.reason == "loop"


def limits_with(limits: ReplyLimits, recent: tuple[str, ...]) -> ReplyLimits:
    return ReplyLimits(
        max_sentences=limits.max_sentences,
        ngram=limits.ngram,
        fallback=limits.fallback,
        recent=recent,
    )


def test_the_same_question_asked_again_may_get_the_same_short_answer() -> None:
    assert same_question("Where is the cafe?", "Sorry, where's the cafe again?")
    assert same_question("What time does it close?", "what time does it close")
    assert not same_question("Where is the cafe?", "Where is the shop?")
    history = History("s", 1000, 10, lambda ms: 1, ReplyLimits(ngram=6), repeat_window=5)
    history.add_turn("Where is the cafe?", "The cafe is on the ground floor.")
    history.add_turn("Is there a shop?", "Yes, by the main door.")
    again = history.prompt_for("Sorry, where's the cafe again?").limits.recent
    assert again == ("Yes, by the main door.",)  # the cafe answer may be given again
    other = history.prompt_for("Where is the shop?").limits.recent
    assert other == ("The cafe is on the ground floor.", "Yes, by the main door.")


def test_a_sentence_begun_before_it_could_be_told_a_repeat_is_finished_not_cut() -> None:
    """Its first chunk went out for first audio; "The cafe is at the" left hanging is
    worse than a clause said again, so the sentence ends and the reply stops there."""
    recent = ("Welcome, in the museum's gift shop, just look for the sign.",)
    limits = ReplyLimits(max_sentences=3, ngram=6, recent=recent)
    text = "The cafe is right at the very back, in the museum's gift shop. It is open."
    guard = run(text, limits)
    assert guard.text.strip() == "The cafe is right at the very back, in the museum's gift shop."
    assert guard.reason == "repeat"


def test_the_hard_cap_ends_even_a_first_sentence_that_runs_on() -> None:
    text = "Well, " + "the river runs past the mill and the bridge and the old tower, " * 6 + "ok."
    guard = run(text, ReplyLimits(max_chars=120, hard_chars=90))
    assert guard.reason == "length"
    assert 0 < len(guard.text) <= 90
    history = History("s", 1000, 10, lambda ms: 1)
    assert history.limits.hard_chars == 0  # none unless configured


def test_a_reply_that_only_repeats_is_sampled_again_before_the_fallback() -> None:
    """The Generation asks for a second sampling (no history, another seed) instead of
    saying the fallback, once; the second try's words are spoken."""
    from voice.conversation.generation import Generation

    limits = ReplyLimits(max_sentences=2, ngram=6, fallback="Sorry, I'm not sure.", resamples=1)
    history = History("Be brief.", 1000, 10, lambda ms: 1, limits, seed=3, repeat_window=5)
    history.add_turn("Who wrote it?", "The author of the book is a fictional character.")
    prompt = history.prompt_for("Is there stew?")
    gen = Generation(1, 1, "Is there stew?", prompt, False, SentenceChunker(), 0.0)
    for token in tokens("The author of the book is a fictional character."):
        gen.add_delta(token, 0.0)
    gen.finish_text()
    assert gen.take_restart() and not gen.llm_done and gen.text == ""
    assert [m.content for m in gen.messages] == ["Be brief.", "Is there stew?"]
    assert getattr(gen.messages, "seed", None) != prompt.seed
    for token in tokens("The author of the book is a fictional character."):
        gen.add_delta(token, 0.0)
    gen.finish_text()  # the second try only repeated too: now the fallback
    assert gen.text == "Sorry, I'm not sure." and gen.llm_done and not gen.take_restart()


def test_a_repeat_after_a_clause_already_said_ends_the_reply_at_that_clause() -> None:
    recent = ("Lord, I'm glad to see you again.",)
    limits = ReplyLimits(max_sentences=3, ngram=6, recent=recent)
    guard = run("In God's sight, and I'm glad to see you again. Welcome.", limits)
    assert guard.text.strip() == "In God's sight," and guard.reason == "repeat"
