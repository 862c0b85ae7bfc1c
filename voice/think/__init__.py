"""The brain: LLM backends (embedded llama.cpp, OpenAI-compatible HTTP).

An engine: it knows neither the ears nor the voice. The conversation history and
the prompt it makes are the reply's (:mod:`voice.reply.history`).
"""
