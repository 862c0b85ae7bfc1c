"""Speech output: sentence chunking, speakable text, TTS backends."""
