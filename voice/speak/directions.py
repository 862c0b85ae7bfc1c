"""Drop stage directions from a streamed reply: "(smiles warmly)", "*laughs*", "[sighs]".

Small chat models narrate their own gestures. A voice must not read them out,
and keeping them in the history teaches the model to write more of them, so
they go before the text is chunked, shown or remembered. Works on deltas of
any size: a direction may open in one token and close several tokens later.
"""

from __future__ import annotations

_CLOSERS = {"(": ")", "[": "]", "*": "*"}


class StageDirections:
    def __init__(self) -> None:
        self._closer: str | None = None

    def push(self, delta: str) -> str:
        """The part of ``delta`` outside any direction."""
        kept: list[str] = []
        for char in delta:
            if self._closer is not None:
                if char == self._closer:
                    self._closer = None
            elif char in _CLOSERS:
                self._closer = _CLOSERS[char]
            else:
                kept.append(char)
        return "".join(kept)
