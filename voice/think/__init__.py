"""The brain: LLM backends (embedded llama.cpp, OpenAI-compatible HTTP) and conversation history."""
