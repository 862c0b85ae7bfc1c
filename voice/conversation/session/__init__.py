"""The conversation as a Sans-I/O core: audio frames and engine results in, events,
engine jobs and output actions out, all on the input's audio clock.

:class:`Session` owns turn-taking and nothing else. It never runs a model,
never reads a clock and never touches a device, so files, a browser, a desk
microphone and scripted tests drive the same code. Its callers:

- feed it the microphone (``feed``) and report what the output played
  (``on_played``);
- run the jobs it hands out (``next_job``), one at a time, and give back the
  results (``on_result``): the order of ``next_job`` *is* the CPU schedule;
- carry out its output actions and show its events (``take``).

The session is one class split by what it decides, each part a module that
builds on the ones before it (and never calls up):

- :mod:`~voice.conversation.session.base`: the state they share, the
  ``[conversation]`` settings, output and the state shown to the user;
- :mod:`~voice.conversation.session.playback`: playback accounting, what of a
  reply was queued and heard, and when it is over (the filler, the apology);
- :mod:`~voice.conversation.session.interruption`: barge-in and resume (pause on
  speech over a reply, then resume, cut, or rejoin a turn the user went on with);
- :mod:`~voice.conversation.session.speculation`: the reply prepared while the
  user pauses, and the judgement of whether the turn is over;
- :mod:`~voice.conversation.session.turn_taking`: what the listener's events mean
  (a final ends the user's turn, and a reply starts, or not);
- :mod:`~voice.conversation.session.surface`: :class:`Session` itself, its input
  and the engine work it hands out.
"""

from voice.conversation.session.base import (
    APOLOGY_GEN,
    FILLER_GEN,
    PHRASE_GENS,
    BeforeReply,
    ConversationConfig,
    EchoCanceller,
    Output,
    valid_text,
)
from voice.conversation.session.surface import Session

__all__ = [
    "APOLOGY_GEN",
    "FILLER_GEN",
    "PHRASE_GENS",
    "BeforeReply",
    "ConversationConfig",
    "EchoCanceller",
    "Output",
    "Session",
    "valid_text",
]
