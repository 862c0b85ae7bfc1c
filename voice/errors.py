"""Errors that tell the user what to do.

Every failure a user can cause or fix (a missing model, a wrong file, a bad
setting) is a :class:`VoiceError` with a stable ``code`` and a ``hint``. Front
ends show ``str(error)``; protocol layers send ``code`` so clients can react
without parsing English.
"""

from __future__ import annotations


class VoiceError(Exception):
    """A failure with a stable machine-readable code and a human hint."""

    code = "error"

    def __init__(self, message: str, hint: str = "", *, code: str | None = None) -> None:
        self.message = message
        self.hint = hint
        if code is not None:
            self.code = code
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return f"{self.message} {self.hint}".strip() if self.hint else self.message


class AudioFormatError(VoiceError):
    """Audio that cannot be read or converted (unknown encoding, bad header)."""

    code = "audio_format"


class ModelNotFoundError(VoiceError):
    """A model file or directory that is missing or unreadable."""

    code = "model_not_found"


class ConfigError(VoiceError):
    """A setting that is unknown or out of range."""

    code = "config"
