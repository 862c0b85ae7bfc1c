"""LocalAgreement and hypothesis alignment on scripted hypotheses."""

import itertools

from voice.listen.agreement import (
    LocalAgreement,
    committed_through,
    drop_overlap,
    says_committed,
    tail_after,
)


def test_commits_what_two_passes_agree_on_but_never_the_last_word() -> None:
    la = LocalAgreement(holdback=1)
    assert la.update(["he", "could"]) == []
    assert la.update(["he", "could"]) == ["he"]  # both agree on "could", but it is last
    assert la.update(["could", "wait"]) == ["could"]
    assert la.update(["wait", "no"]) == ["wait"]
    assert la.committed == ["he", "could", "wait"]
    assert la.tail == ["no"]


def test_comparison_ignores_case_and_punctuation() -> None:
    la = LocalAgreement(holdback=0)
    la.update(["Hello,", "World"])
    assert la.update(["hello", "world."]) == ["hello", "world."]


def test_committed_words_never_change() -> None:
    la = LocalAgreement(holdback=0)
    history = []
    for hyp in ["a b c", "a b d", "x y", "x y z", "q"]:
        la.update(hyp.split())
        history.append(list(la.committed))
    for earlier, later in itertools.pairwise(history):
        assert later[: len(earlier)] == earlier


def test_tail_after_exact_prefix() -> None:
    assert tail_after(["he", "could"], ["He", "could", "wait"]) == ["wait"]


def test_tail_after_a_revised_committed_word() -> None:
    committed = ["for", "a", "full", "hour", "he", "had", "paced"]
    hypothesis = ["For", "a", "full", "hour,", "he", "had", "paste", "up", "and", "down"]
    assert tail_after(committed, hypothesis) == ["up", "and", "down"]


def test_tail_after_a_revised_last_word_the_speaker_says_again_later() -> None:
    """Not lined up by the shared "you" at the end: the pass's new words are new."""
    committed = words("And so my fellow Americans ask not what you")
    hypothesis = words("And so my fellow Americans ask not what your country can do for you.")
    assert tail_after(committed, hypothesis) == words("country can do for you.")


def test_tail_after_words_a_pass_put_in_among_the_committed_ones() -> None:
    """Heard more of the audio, or spelled out: still a revision, up to the shared word."""
    assert tail_after(words("the view and"), words("the view of you and let's see")) == words(
        "let's see"
    )
    committed = words("When it was the 673rd night,")
    hypothesis = words("When it was the six hundred, then seventy-third night she pursued.")
    assert tail_after(committed, hypothesis) == words("she pursued.")


def test_tail_after_words_in_nothing_like_the_committed_ones() -> None:
    """A revised word, not a lost one; nothing in common: as many words as committed."""
    assert tail_after(words("ask"), words("as what you can do")) == words("what you can do")
    assert tail_after(words("what you"), words("what your country")) == ["country"]
    assert tail_after(words("a b c"), words("x y")) == []


def test_tail_after_nothing_committed_is_everything() -> None:
    assert tail_after([], ["a", "b"]) == ["a", "b"]


def test_the_words_a_cut_repeats_are_dropped_once() -> None:
    before = ["he", "paced", "up", "and", "Down,"]
    assert drop_overlap(before, ["down", "waiting."]) == ["waiting."]
    assert drop_overlap(before, ["and", "down", "waiting."]) == ["waiting."]
    assert drop_overlap(before, ["waiting."]) == ["waiting."]
    assert drop_overlap([], ["a"]) == ["a"]


def words(text: str) -> list[str]:
    return text.split()


def test_a_segment_lines_up_with_the_committed_words_despite_a_rewritten_word() -> None:
    committed = words("okay so the view and let's see myself and my coz not here so")
    assert committed_through(committed, words("Okay, so the view and let's see")) == 7
    rewritten = words("Okay, so the view of you and let's see myself and my coz not here.")
    assert committed_through(committed, rewritten) == 13  # through "here"


def test_a_segment_that_does_not_end_on_committed_words_is_not_lined_up() -> None:
    committed = words("okay so the view and let's see myself")
    assert committed_through(committed, words("Okay, so the view and let's see myself and")) is None
    assert committed_through(committed, words("Okay, so the view and then")) is None
    # The last two agree, but most words do not: no confidence where the segment ends.
    assert committed_through(committed, words("Well I was thinking we see myself")) is None
    assert committed_through([], ["hello"]) is None


def test_a_pass_that_left_out_the_committed_words_does_not_say_them() -> None:
    committed = words("ask what you can do for")
    # The pass at the pause, over "...for your country has never been surpassed":
    assert not says_committed(committed, words("country has never been surpassed."))
    assert says_committed(committed, words("ask what you can do for your country"))
    # Reworded, as Whisper does from pass to pass: most of the words are there.
    assert says_committed(committed, words("as what you can do for your country"))
    assert says_committed([], ["anything"])
