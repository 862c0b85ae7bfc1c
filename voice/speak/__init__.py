"""Speech output: sentence chunking, speakable text, TTS backends.

An engine: it knows neither the ears nor the LLM. What a reply may say, and the
streaming LLM -> speech pipeline, are the reply's (:mod:`voice.reply`).
"""
