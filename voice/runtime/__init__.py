"""The runtime: what runs the conversation core's jobs on the loaded engines.

The core (:mod:`voice.conversation`) only asks for work; here it is done. One
session's lane (:mod:`~voice.runtime.engines`, with its fault drills in
:mod:`~voice.runtime.faults`), the clocks that deliver results on audio time or
wall time (:mod:`~voice.runtime.clocks`), and the engine hub that schedules many
sessions on one engine thread (:mod:`~voice.runtime.hub`, its LLM contexts in
:mod:`~voice.runtime.contexts`), with the memory they hand back
(:mod:`~voice.runtime.memory`). Every transport uses it: the WebSocket server,
the embedding API's model pool, the desk and the simulator; so it sits below
all of them and knows none, nor the settings.
"""
