"""The endpointer on scripted frame decisions (one char per 20 ms frame: '#' voiced)."""

from voice.listen.endpoint import Ended, EndpointConfig, Endpointer, Started


def run(pattern: str, **config: int) -> list[tuple[int, object]]:
    endpointer = Endpointer(EndpointConfig(**config))
    out = []
    for i, ch in enumerate(pattern):
        event = endpointer.push(ch == "#")
        if event is not None:
            out.append((i, event))
    return out


def test_start_needs_enough_voiced_audio_and_reports_first_voiced_frame() -> None:
    events = run("....#.#.#####" + "." * 40)
    first = events[0]
    assert isinstance(first[1], Started)
    assert first[1].onset_frame == 4  # the first voiced frame inside the window
    assert first[0] > 4  # detected later than the onset


def test_a_lone_click_never_starts() -> None:
    assert run("..#.." + "." * 50) == []
    assert run(".##.." + "." * 50) == []  # 40 ms < 120 ms of voiced audio


def test_one_unvoiced_frame_inside_a_word_does_not_end_it() -> None:
    events = run("#" * 20 + "." + "#" * 20 + "." * 40)
    assert [type(e) for _, e in events] == [Started, Ended]
    assert events[1][1].last_speech_frame == 40


def test_end_after_configured_silence() -> None:
    events = run("#" * 20 + "." * 40, end_silence_ms=400)
    ended_at, ended = events[1]
    assert isinstance(ended, Ended)
    assert ended.last_speech_frame == 19
    assert ended_at == 19 + 400 // 20


def test_a_noise_blip_during_silence_does_not_restart_the_clock() -> None:
    plain = run("#" * 20 + "." * 40, end_silence_ms=600)
    blip = run("#" * 20 + "....." + "#" + "." * 40, end_silence_ms=600)
    assert plain[1][0] == blip[1][0]


def test_speech_resuming_in_the_pause_keeps_one_utterance() -> None:
    events = run("#" * 20 + "." * 10 + "#" * 20 + "." * 40, end_silence_ms=600)
    assert [type(e) for _, e in events] == [Started, Ended]


def test_end_silence_can_change_between_frames() -> None:
    endpointer = Endpointer(EndpointConfig(end_silence_ms=1000))
    for _ in range(20):
        endpointer.push(True)
    for _ in range(10):
        assert endpointer.push(False) is None
    endpointer.config.end_silence_ms = 200
    assert isinstance(endpointer.push(False), Ended)


def test_force_end_closes_open_speech_only() -> None:
    endpointer = Endpointer()
    assert endpointer.force_end() is None
    for _ in range(10):
        endpointer.push(True)
    assert isinstance(endpointer.force_end(), Ended)
    assert not endpointer.speaking


def run_levels(frames: list[tuple[bool, float]], **config: int) -> list[tuple[int, object]]:
    endpointer = Endpointer(EndpointConfig(**config))
    out = []
    for i, (voiced, level) in enumerate(frames):
        event = endpointer.push(voiced, level)
        if event is not None:
            out.append((i, event))
    return out


def ended_frame(frames: list[tuple[bool, float]], **config: int) -> int:
    """The last speech frame of the first utterance that ended."""
    ended = [e for _, e in run_levels(frames, **config) if isinstance(e, Ended)]
    return ended[0].last_speech_frame


QUIET = [(False, -70.0)] * 25  # a quiet room before the user speaks
WORDS = [(True, -20.0)] * 20  # frames 25..44
HANGOVER = [(True, -62.0)] * 5  # the VAD still says voiced, but nothing is audible


def test_the_silence_clock_starts_at_the_last_audible_frame_not_the_vad_hangover() -> None:
    frames = QUIET + WORDS + HANGOVER + [(False, -70.0)] * 40
    ended_at, ended = run_levels(frames, end_silence_ms=400)[1]
    assert isinstance(ended, Ended)
    assert ended.last_speech_frame == 44
    assert ended_at == 44 + 400 // 20
    # Without levels the VAD's own last voiced frame ends it, 100 ms later.
    endpointer = Endpointer(EndpointConfig(end_silence_ms=400))
    vad_only = [endpointer.push(voiced) for voiced, _ in frames]
    assert [e.last_speech_frame for e in vad_only if isinstance(e, Ended)] == [49]


def test_a_weak_final_consonant_within_30_db_of_the_peak_is_still_speech() -> None:
    frames = QUIET + WORDS + [(True, -45.0)] * 3 + HANGOVER + [(False, -70.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 47


def test_in_a_noisy_room_the_tail_is_judged_against_the_noise_floor() -> None:
    noisy = [(False, -52.0), (False, -50.0)] * 15  # a fan, 30 dB under the voice
    frames = noisy + WORDS + [(True, -47.0)] * 4 + [(False, -48.0)] * 40
    # -47 dB is within 6 dB of the fan: the tail, not the words; nor is the fan after.
    assert ended_frame(frames, end_silence_ms=400) == 30 + 19


def test_digital_silence_before_the_room_is_heard_is_not_its_noise_floor() -> None:
    # A stream that opens with no signal (a transport's fill, a file's silence), then a
    # fan: the floor is the fan's, so its frames after the words are not their tail.
    nothing = [(False, -180.0)] * 30
    noisy = [(False, -52.0), (False, -50.0)] * 5
    tail = [(False, -48.0)] * 40
    assert ended_frame(nothing + noisy + WORDS + tail, end_silence_ms=400) == 40 + 19
    # Counted as the floor, the silence made every frame of the fan "audible".
    quantised = [(False, -85.0)] * 30  # quiet, but a signal: one step of 16-bit audio
    assert ended_frame(quantised + noisy + WORDS + tail, end_silence_ms=400) == 40 + 19 + 10


def test_speech_right_after_digital_silence_leaves_the_floor_to_the_peak() -> None:
    # The first sounds the VAD had not called speech yet are all that was heard of the
    # "room": a floor of them would take the words' weak last consonant for the room.
    nothing = [(False, -180.0)] * 30
    first_sounds = [(False, -30.0)] * 3
    weak_end = [(True, -45.0)] * 3  # within 30 dB of the peak: still the words
    frames = nothing + first_sounds + WORDS + weak_end + [(False, -70.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 33 + 20 + 3 - 1


def test_speech_the_level_misjudges_ends_at_most_tail_trim_before_the_vad() -> None:
    # A voice that drops 40 dB but stays voiced (the VAD is right): the clock may run
    # ahead by tail_trim_ms, never more, so the turn still does not end while voiced.
    frames = QUIET + WORDS + [(True, -62.0)] * 60
    assert [type(e) for _, e in run_levels(frames, end_silence_ms=400, tail_trim_ms=200)] == [
        Started
    ]
    ends = run_levels(frames + [(False, -70.0)] * 40, end_silence_ms=400, tail_trim_ms=200)
    ended_at, ended = ends[1]
    assert isinstance(ended, Ended)
    assert ended.last_speech_frame == 25 + 20 + 60 - 1 - 200 // 20
    assert ended_at == 104 + 400 // 20 - 200 // 20


def test_tail_trim_zero_ends_on_the_vad_alone() -> None:
    frames = QUIET + WORDS + HANGOVER + [(False, -70.0)] * 40
    assert ended_frame(frames, end_silence_ms=400, tail_trim_ms=0) == 49


def test_a_final_consonant_the_vad_let_go_of_is_still_speech_for_a_while() -> None:
    fricative = [(False, -40.0)] * 4  # audible, unvoiced, right after the words
    frames = QUIET + WORDS + fricative + [(False, -70.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 48
    # ... so is the burst of a final "p" after its silent closure ("stop").
    burst = HANGOVER[:2] + [(False, -70.0)] * 5 + [(False, -45.0)]
    frames = QUIET + WORDS + burst + [(False, -70.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 44 + 8
    # ... but a sound that goes on (music starting) holds the turn open at most 200 ms,
    frames = QUIET + WORDS + [(False, -25.0)] * 60 + [(False, -70.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 44 + 10
    # ... and a sound after a longer gap is not the speech's.
    frames = QUIET + WORDS + [(False, -70.0)] * 11 + fricative + [(False, -70.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 44


def test_a_release_split_across_two_frames_is_judged_by_its_louder_part() -> None:
    # The release of a final "p", 31 dB under the vowels as two frames average it, but
    # 28 dB under in the half of the frame that holds it: still the word's sound.
    endpointer = Endpointer(EndpointConfig(end_silence_ms=400))
    closure = [(True, -62.0, -61.0)] * 2 + [(False, -70.0, -69.0)] * 5
    release = [(False, -51.0, -48.0)]
    frames = [(v, db, db) for v, db in QUIET + WORDS] + closure + release
    events = [endpointer.push(*f) for f in frames + [(False, -70.0, -69.0)] * 40]
    assert [e.last_speech_frame for e in events if isinstance(e, Ended)] == [44 + 8]
    # Without the louder part, the same frames end the speech at the vowel.
    assert ended_frame([(v, db) for v, db, _ in frames] + [(False, -70.0)] * 40,
                       end_silence_ms=400) == 44  # fmt: skip


def test_speech_from_the_first_frame_is_not_taken_for_the_noise_floor() -> None:
    frames = [(True, -20.0)] * 30 + [(True, -19.0)] * 10 + [(False, -70.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 39


def test_speech_barely_above_the_noise_is_not_all_taken_for_its_tail() -> None:
    # A fan 4 dB under the voice: over-the-floor would call every word a tail; the
    # guard keeps frames within 20 dB of the peak audible.
    noisy = [(False, -24.0)] * 30
    frames = noisy + [(True, -20.0)] * 40 + [(False, -24.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 30 + 39
    # ... and the noise after the words does not extend them.
    frames = noisy + [(True, -20.0)] * 40 + [(False, -21.0)] * 40
    assert ended_frame(frames, end_silence_ms=400) == 30 + 39


PAUSE = [(False, -70.0)] * 19  # frames 45..63: the 400 ms wait ends at frame 64
NEW_WORD = [(False, -30.0)] * 2 + [(True, -20.0)] * 20  # the VAD hears it at its 3rd frame


def test_the_turn_does_not_end_under_the_first_sound_of_a_new_word() -> None:
    frames = QUIET + WORDS + PAUSE + NEW_WORD + [(False, -70.0)] * 40
    events = run_levels(frames, end_silence_ms=400)
    assert [type(e) for _, e in events] == [Started, Ended]
    assert ended_frame(frames, end_silence_ms=400) == 44 + len(PAUSE) + len(NEW_WORD)
    # Without the hold the VAD is too late: the turn ends and a second one starts.
    split = run_levels(frames, end_silence_ms=400, resume_hold_ms=0)
    assert [type(e) for _, e in split] == [Started, Ended, Started, Ended]
    assert split[1][0] == 44 + 400 // 20


def test_a_sound_that_never_becomes_speech_holds_the_end_at_most_resume_hold_ms() -> None:
    ticks = [(False, -30.0), (False, -70.0)] * 40  # a clock ticking: rising, never voiced
    ends = run_levels(QUIET + WORDS + PAUSE + ticks, end_silence_ms=400, resume_hold_ms=100)
    ended_at, ended = ends[1]
    assert isinstance(ended, Ended) and ended.last_speech_frame == 44
    assert 44 + 400 // 20 < ended_at <= 44 + (400 + 100) // 20


def test_steady_sound_in_the_pause_does_not_hold_the_end() -> None:
    # Music that starts with the pause is the speech's tail for 200 ms at most (see
    # above), and never rises out of its own level: the turn ends on time.
    frames = QUIET + WORDS + [(False, -25.0)] * 60
    ended_at, ended = run_levels(frames, end_silence_ms=400)[1]
    assert isinstance(ended, Ended)
    assert ended_at == ended.last_speech_frame + 400 // 20


def test_words_aligned_after_the_speech_are_the_decoders_own_ending() -> None:
    from voice.listen.spoken import unspoken_tail
    from voice.listen.whisper import WordTime

    # "...the door to" then silence from 2.40 s; Whisper wrote "...the door to see."
    said = [WordTime("the", 1.50, 1.70, 0.99), WordTime("door", 1.70, 2.05, 0.98),
            WordTime("to", 2.05, 2.38, 0.97)]  # fmt: skip
    made_up = [WordTime("see", 2.38, 2.70, 0.95), WordTime(".", 2.70, 3.10, 0.8)]
    assert unspoken_tail(said + made_up, speech_end_s=2.40, slack_s=0.08).words == 1
    assert unspoken_tail(said, speech_end_s=2.40, slack_s=0.08).words == 0
    # A real last word starts a word's length before the end of the speech.
    whole = [*said, WordTime("leave", 2.40, 2.80, 0.99), WordTime(".", 2.80, 3.0, 0.9)]
    assert unspoken_tail(whole, speech_end_s=2.85, slack_s=0.08).words == 0
    assert unspoken_tail([], speech_end_s=1.0, slack_s=0.08).words == 0


def test_a_real_last_word_squeezed_into_the_last_frames_is_kept() -> None:
    from voice.listen.spoken import unspoken_tail
    from voice.listen.whisper import WordTime

    # "...see you again, Phil." with the audible end at 2.72 s: the alignment ran out of
    # frames and put "Phil" at 2.82-2.84 s. Seen on a corpus clip; it is a real word.
    timed = [WordTime("again", 2.16, 2.52, 0.98), WordTime(",", 2.52, 2.82, 0.75),
             WordTime("Phil", 2.82, 2.84, 0.55), WordTime(".", 2.84, 3.88, 0.8)]  # fmt: skip
    assert unspoken_tail(timed, speech_end_s=2.72, slack_s=0.08).words == 0


def test_words_squeezed_in_far_past_the_speech_were_not_said() -> None:
    from voice.listen.spoken import unspoken_tail
    from voice.listen.whisper import WordTime

    # "...Then they sailed on [1.5 s] till" heard as "...sailed on to the land.": the
    # alignment put "to" from the end of the speech (4.00 s) across the silence, and
    # "the land" squeezed into one frame at the end of its margin, a second later.
    timed = [WordTime("sailed", 3.40, 3.74, 0.99), WordTime("on", 3.74, 4.02, 0.97),
             WordTime("to", 4.02, 5.08, 0.46), WordTime("the", 5.08, 5.08, 0.15),
             WordTime("land", 5.08, 5.08, 0.05), WordTime(".", 5.08, 5.08, 0.5)]  # fmt: skip
    assert unspoken_tail(timed, speech_end_s=4.00, slack_s=0.08).words == 3


def test_a_word_too_long_for_its_sound_was_broken_off() -> None:
    from voice.listen.spoken import unspoken_tail
    from voice.listen.whisper import WordTime

    # "...the lower case being in [1.5 s]": Whisper wrote "...being infected.", three
    # syllables aligned from 0.18 s before the end of the speech (the sound of "in").
    before = [WordTime("case", 1.00, 1.44, 0.93), WordTime("being", 1.44, 1.84, 0.82)]
    lengthened = [WordTime("infected", 1.84, 2.16, 0.51), WordTime(".", 2.16, 2.3, 0.8)]
    broken = unspoken_tail(before + lengthened, speech_end_s=2.02, slack_s=0.08)
    assert (broken.words, broken.cut_off) == (1, True)
    per_word = unspoken_tail(before + lengthened, 2.02, 0.08, per_syllable=False)
    assert (per_word.words, per_word.cut_off) == (0, False)
    # Real last words of the corpus, with the least sound seen for their syllables.
    for word, sounded_s in (("matter", 0.22), ("involved", 0.22), ("exhibition", 0.52)):
        last = [*before, WordTime(word, 2.0 - sounded_s, 2.1, 0.9)]
        assert unspoken_tail(last, speech_end_s=2.0, slack_s=0.08).words == 0, word
    # A word the decoder added after the speech is dropped, but was not begun.
    added = unspoken_tail([*before, WordTime("today", 1.9, 2.2, 0.9)], 1.86, 0.08)
    assert (added.words, added.cut_off) == (1, False)


def test_a_word_whisper_wrote_broken_off_says_the_speaker_stopped_inside_a_phrase() -> None:
    from voice.listen.spoken import unspoken_tail
    from voice.listen.whisper import WordTime

    # "...Lord, but [1.0 s] I'm" heard at the pause as "Lord, wait a-", "a" aligned
    # after the speech and the "-" a token of its own: dropped, but the turn was broken
    # off, not finished.
    said = [WordTime("Lord,", 0.20, 0.55, 0.9), WordTime("wait", 0.55, 0.84, 0.6)]
    for tail in ([WordTime("a", 0.86, 1.20, 0.3), WordTime("-", 1.20, 1.20, 0.2)],
                 [WordTime("a-", 0.86, 1.20, 0.3)]):  # fmt: skip
        broken = unspoken_tail([*said, *tail], 0.86, 0.08)
        assert (broken.words, broken.cut_off) == (1, True)
    assert not unspoken_tail([*said, WordTime("-", 0.84, 0.9, 0.2)], 0.86, 0.08).cut_off
    whole = unspoken_tail([*said, WordTime("again.", 0.86, 1.20, 0.3)], 0.86, 0.08)
    assert (whole.words, whole.cut_off) == (1, False)  # a whole word: the decoder's ending


def test_syllables_are_never_overcounted() -> None:
    from voice.listen.spoken import syllables

    assert [syllables(w) for w in ("in", "infected.", "exhibition", "Phil")] == [1, 3, 4, 1]
    # Silent endings and digits count low: a word thought longer than it is would be
    # taken for broken off.
    assert [syllables(w) for w in ("mobile", "opened", "600", "—")] == [2, 2, 1, 1]


def run_onsets(frames: list[tuple[bool, float, bool]], **config: int) -> list[tuple[int, object]]:
    """Frames of (voiced, level, hair trigger)."""
    endpointer = Endpointer(EndpointConfig(**config))
    out = []
    for i, (voiced, level, onset) in enumerate(frames):
        event = endpointer.push(voiced, level, onset=onset)
        if event is not None:
            out.append((i, event))
    return out


def with_onset(
    frames: list[tuple[bool, float]], onset: bool = False
) -> list[tuple[bool, float, bool]]:
    return [(voiced, level, onset) for voiced, level in frames]


SILENT = [(False, -70.0, False)] * 120
GAP = [(False, -70.0, False)] * 12  # frames 45..56: past the words' own tail


def test_a_soft_voice_the_vad_does_not_call_speech_holds_the_end() -> None:
    # The hair trigger hears 600 ms of a voice the VAD does not (a cold, a mumble): a
    # reply started then would be paused at once. The silence counts from its end.
    soft = [(False, -40.0, True)] * 30  # frames 57..86
    frames = with_onset(QUIET + WORDS) + GAP + soft + SILENT
    ended_at, ended = run_onsets(frames, end_silence_ms=400)[1]
    assert isinstance(ended, Ended) and ended.last_speech_frame == 44
    assert ended_at == 86 + 400 // 20
    # Off, the turn ends under it.
    ended_at, _ = run_onsets(frames, end_silence_ms=400, voice_run_ms=0)[1]
    assert ended_at == 44 + 400 // 20


def test_a_hair_trigger_blip_or_an_inaudible_run_does_not_hold_the_end() -> None:
    blip = [(False, -40.0, True)] * 3  # 60 ms: under voice_run_ms
    faint = [(False, -69.0, True)] * 10  # not over the room's floor
    for sound in (blip, faint):
        frames = with_onset(QUIET + WORDS) + GAP + sound + SILENT
        # (resume_hold_ms off: a blip that rises out of the pause is its business)
        ended_at, _ = run_onsets(frames, end_silence_ms=400, resume_hold_ms=0)[1]
        assert ended_at == 44 + 400 // 20


def test_a_steady_sound_the_hair_trigger_hears_holds_the_end_at_most_voice_hold_ms() -> None:
    television = [(False, -40.0, True)] * 200
    frames = with_onset(QUIET + WORDS) + GAP + television
    ended_at, ended = run_onsets(frames, end_silence_ms=400, voice_hold_ms=1000)[1]
    assert isinstance(ended, Ended) and ended.last_speech_frame == 44
    assert ended_at == 44 + (400 + 1000) // 20


def ended_with_sure(frames: list[tuple[bool, float, bool, bool]]) -> tuple[int, Ended]:
    """Frames of (voiced, level, hair trigger, second opinion sure): where the one end
    came, and what it ended."""
    endpointer = Endpointer(EndpointConfig(end_silence_ms=400))
    events = [endpointer.push(v, db, onset=on, sure=sure) for v, db, on, sure in frames]
    ((ended_at, ended),) = [(i, e) for i, e in enumerate(events) if isinstance(e, Ended)]
    return ended_at, ended


def test_a_voice_the_second_opinion_is_sure_of_holds_the_end_however_soft() -> None:
    # A drawn-out word 3 dB over the room: not audible by the floor's measure, so the
    # hair trigger's run does not count; Silero is sure of it (the cold speaker's "than").
    room = [(False, -70.0, False, False)] * 25
    words = [(True, -20.0, True, True)] * 20  # frames 25..44
    after = [(False, -70.0, False, False)] * 40
    soft = [(False, -67.0, True, True)] * 30  # frames 45..74
    ended_at, ended = ended_with_sure(room + words + soft + after)
    assert ended.last_speech_frame == 44 and ended_at == 74 + 400 // 20
    # Silero's own decay just past the words is not more voice: sure for 200 ms only.
    decay = [(False, -67.0, True, True)] * 10
    ended_at, _ = ended_with_sure(room + words + decay + after)
    assert ended_at == 44 + 400 // 20
