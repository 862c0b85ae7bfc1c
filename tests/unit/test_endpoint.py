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
