"""The browser protocol decoder: every malformed message is a clear, coded error."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from voice.audio.format import to_pcm16
from voice.serve.protocol import (
    CLOSE_PROTOCOL_ERROR,
    MAX_TEXT_BYTES,
    Hello,
    Played,
    ProtocolError,
    ProtocolViolation,
    Talk,
    downlink_frame,
    parse_audio,
    parse_downlink,
    parse_text,
)


def test_hello_negotiates_a_rate() -> None:
    raw = json.dumps({"type": "hello", "protocol": 1, "sample_rate": 48000, "format": "pcm16"})
    assert parse_text(raw) == Hello(48000)


def test_played_reports_a_position() -> None:
    assert parse_text('{"type": "played", "reply_id": 3, "samples": 320}') == Played(3, 320)


def test_talk_is_push_to_talk() -> None:
    assert parse_text('{"type": "talk", "down": true}') == Talk(True)
    assert parse_text('{"type": "talk", "down": false}') == Talk(False)
    for bad in ('{"type": "talk"}', '{"type": "talk", "down": 1}'):
        with pytest.raises(ProtocolError) as caught:
            parse_text(bad)
        assert caught.value.code == "bad_field"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("{not json", "bad_json"),
        ("[1, 2]", "bad_message"),
        ('{"kind": "hello"}', "bad_message"),
        ('{"type": "dance"}', "unknown_type"),
        ('{"type": "hello", "sample_rate": 4000}', "unsupported_rate"),
        ('{"type": "hello", "sample_rate": 96000}', "unsupported_rate"),
        ('{"type": "hello", "sample_rate": "16000"}', "bad_field"),
        ('{"type": "hello", "sample_rate": 16000, "format": "opus"}', "unsupported_format"),
        ('{"type": "played", "reply_id": true, "samples": 1}', "bad_field"),
        ('{"type": "played", "reply_id": 1, "samples": -5}', "bad_field"),
        ('{"type": "played", "reply_id": 1}', "bad_field"),
        (b"\xff\xfe", "bad_json"),
        ('{"type": "played", "pad": "' + "x" * MAX_TEXT_BYTES + '"}', "message_too_large"),
    ],
)
def test_malformed_text_is_a_coded_error_that_says_what_to_do(raw: str, code: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_text(raw)
    assert caught.value.code == code
    assert str(caught.value)


def test_another_protocol_version_closes_the_connection() -> None:
    with pytest.raises(ProtocolViolation) as caught:
        parse_text('{"type": "hello", "protocol": 2, "sample_rate": 16000}')
    assert caught.value.close_code == CLOSE_PROTOCOL_ERROR
    assert caught.value.code == "unsupported_protocol"


def test_audio_frames_are_pcm16_little_endian() -> None:
    samples = np.array([0, 16384, -32768, 32767], dtype="<i2")
    audio = parse_audio(samples.tobytes(), 16000)
    assert audio.dtype == np.float32
    assert np.allclose(audio, [0.0, 0.5, -1.0, 32767 / 32768])
    assert to_pcm16(audio) == samples.tobytes()


def test_odd_and_oversized_audio_frames_are_refused() -> None:
    with pytest.raises(ProtocolError) as odd:
        parse_audio(b"\x00\x01\x02", 16000)
    assert odd.value.code == "odd_length"
    with pytest.raises(ProtocolError) as big:
        parse_audio(bytes(2 * 16000), 16000)  # one second in one frame
    assert big.value.code == "frame_too_large"


def test_downlink_frames_carry_reply_and_offset() -> None:
    audio = np.linspace(-0.5, 0.5, 320, dtype=np.float32)
    reply_id, offset, back = parse_downlink(downlink_frame(7, 640, audio))
    assert (reply_id, offset) == (7, 640)
    assert np.allclose(back, audio, atol=1 / 32768)


@given(st.one_of(st.text(max_size=200), st.binary(max_size=200)))
def test_any_text_message_parses_or_raises_a_protocol_error(raw: str | bytes) -> None:
    try:
        parse_text(raw)
    except (ProtocolError, ProtocolViolation) as exc:
        assert exc.code and str(exc)


@given(st.binary(max_size=20000), st.sampled_from([8000, 16000, 48000]))
def test_any_binary_frame_decodes_or_raises_a_protocol_error(raw: bytes, rate: int) -> None:
    try:
        audio = parse_audio(raw, rate)
    except ProtocolError as exc:
        assert exc.code in ("odd_length", "frame_too_large")
    else:
        assert len(audio) == len(raw) // 2 and np.all(np.abs(audio) <= 1.0)
