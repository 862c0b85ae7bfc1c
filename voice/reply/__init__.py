"""The reply: what the assistant says, from the history to spoken audio.

Above the three engines and beside the conversation core: a reply needs the
LLM (:mod:`voice.think`) and the voice (:mod:`voice.speak`), which must not know
each other. Here are the prompt and what was said (:mod:`~voice.reply.history`),
the guard that keeps a spoken reply short and loop-free (:mod:`~voice.reply.guard`),
the streaming LLM -> sentence -> speech pipeline (:mod:`~voice.reply.pipeline`) and
the typed ``voice chat`` loop built on it (:mod:`~voice.reply.chat`). The core's
Sans-I/O reply (:mod:`voice.conversation.generation`) uses the same guard and history.
"""
