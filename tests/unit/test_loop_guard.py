"""The guard that spots Whisper decoder loops in a hypothesis."""

from voice.listen.whisper import _looks_looped, _repeat_cut, _unchained, _without_tail_loop


def _split(text: str) -> list[str]:
    return text.split()


def test_sentence_repeated_is_a_loop_and_cut_after_first_copy() -> None:
    words = ["He", "could", "wait", "no", "longer.", "He", "could", "wait", "no", "longer."]
    assert _repeat_cut(words) == 5
    assert _looks_looped(words, hit_limit=False)


def test_short_phrase_three_times_is_a_loop() -> None:
    assert _repeat_cut(["and", "so", "and", "so", "and", "so"]) == 2


def test_ordinary_sentences_are_not_loops() -> None:
    for text in [
        "ask not what your country can do for you ask what you can do for your country",
        "yes yes I know",
        "one two three",
    ]:
        assert not _looks_looped(text.split(), hit_limit=False), text


def test_hitting_the_token_budget_counts_as_a_loop() -> None:
    assert _looks_looped(["fine"], hit_limit=True)


def test_the_generation_length_leaves_room_for_the_whole_budget() -> None:
    from voice.listen.whisper import generation_length

    assert generation_length(2, 82) == (164, 82)  # before: 84, which allowed 42
    assert generation_length(1, 164) == (328, 164)
    assert generation_length(60, 100) == (200, 100)
    assert generation_length(60, 300) == (448, 224)  # capped: Whisper's own limit


def test_a_loop_that_runs_to_the_end_is_cut_after_its_first_copy() -> None:
    # Seen on a joined turn's final pass: decoding again on three times the margin
    # cost 0.8 s; the words before the loop are all that was said.
    looped = "of movable types, then in the same operations with ugly ones."
    looped += " In the same operations with ugly ones..."
    assert _without_tail_loop(looped.split()) == looped.split()[:11]
    unfinished = "either to the to the to the to"  # the last copy cut short
    assert _without_tail_loop(unfinished.split()) == ["either", "to", "the"]
    # A short repeat followed by more words may be the speaker's: all kept, not decoded
    # again (which lost the words after it).
    went_on = "some more words, words, words. And that should be all, thanks!"
    assert _repeat_cut(went_on.split()) == 3
    assert _without_tail_loop(went_on.split()) == went_on.split()
    # ... and a loop that runs to the end after them is still cut.
    looped_after = went_on.split() + _split("All right, thanks!") * 3
    assert _without_tail_loop(looped_after) == [*went_on.split(), "All", "right,"]
    assert _without_tail_loop(["no", "loop", "in", "these", "words"]) is None


def test_words_said_after_a_long_loop_are_kept() -> None:
    # A final pass over "For the twentieth time that evening the [2 s] two men shook
    # hands": tiny.en looped in the pause and then wrote what followed it. Cutting at
    # the loop's first copy answered "...that either to the".
    heard = "For the twentieth time that either to the" + " to the" * 11
    heard += " two men shook hands."
    words = heard.split()
    assert _without_tail_loop(words) == (
        _split("For the twentieth time that either to the two men shook hands.")
    )
    # A stray word inside the loop does not end it; one word after it is the loop's.
    strays = _split("we went to the to the to the to t to the to the park today")
    assert _without_tail_loop(strays) == _split("we went to the park today")
    ending = _split("we went to the to the to the to the to the to t")
    assert _without_tail_loop(ending) == ["we", "went", "to", "the"]


def test_a_stutter_loop_written_as_one_word_is_seen_and_cut() -> None:
    # A final pass over "...that evening, the [1.5 s] two men shook hands": tiny.en
    # wrote the loop as one hyphenated word, and the guard saw no loop in the words,
    # so the pass was decoded again on three times the margin (1.6 s in all).
    heard = "the two time that evening, the t-the-t-the-t-the-t-the-to-the-to-the-the-the-the-"
    heard += "the-the-the-the-the-the-the-the-the-the"
    words = _unchained(heard.split())
    assert words[:7] == ["the", "two", "time", "that", "evening,", "the", "t"]
    assert _looks_looped(words, hit_limit=False)
    assert _without_tail_loop(words) == words[:7]  # "to" twice among 33 of the loop's own
    for word in ("state-of-the-art", "well-known", "bye-bye", "mother-in-law", "I-I-I"):
        assert _unchained([word]) == [word]
    stutter = ["I-I-I", "think", "we", "should", "b-b-b-b-begin", "now"]
    assert _unchained(stutter) == stutter and not _looks_looped(stutter, hit_limit=False)
