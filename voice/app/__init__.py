"""The composition layer: where :class:`voice.config.Settings` becomes running parts.

Everything below this package takes only its own section of the settings (the
listener its ``ListenConfig``, the core its ``ConversationConfig``, the engine hub
a session factory and a timeout), so a change to one section's fields touches that
section and this layer, never another package's imports. The assistant, the CLI
and the benchmarks build through here. See docs/architecture.md.
"""
