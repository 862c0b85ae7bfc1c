"""Drop stage directions from a streamed reply: "(smiles warmly)", "*laughs*", "[sighs]".

Small chat models narrate their own gestures. A voice must not read them out,
and keeping them in the history teaches the model to write more of them, so
they go before the text is chunked, shown or remembered. Works on deltas of
any size: a direction may open in one token and close several tokens later.

What only looks like the start of one is given back, never lost: a mark that
does not close within a short gesture's length or before the line ends ("2 * 5
euros (children free. The exit is on the left."), and an asterisk followed by a
space (a list bullet, a product, "5* hotel"). Text held while deciding comes out
late by at most that length, or at the end of the reply.
"""

from __future__ import annotations

_CLOSERS = {"(": ")", "[": "]", "*": "*"}
MAX_DIRECTION_CHARS = 60  # "(leans back in the chair and smiles warmly)" fits


class StageDirections:
    def __init__(self) -> None:
        self._held: list[str] = []  # an opening mark and what followed it, undecided

    def push(self, delta: str) -> str:
        """The part of ``delta`` outside any direction (and earlier text given back)."""
        kept: list[str] = []
        for char in delta:
            if not self._held:
                if char in _CLOSERS:
                    self._held.append(char)
                else:
                    kept.append(char)
                continue
            opener = self._held[0]
            self._held.append(char)
            if char == _CLOSERS[opener]:
                self._held = []  # a whole direction: dropped
            elif (
                char == "\n"
                or len(self._held) > MAX_DIRECTION_CHARS
                or (opener == "*" and len(self._held) == 2 and char.isspace())
            ):
                kept.extend(self._held)  # not a direction after all
                self._held = []
        return "".join(kept)

    def flush(self) -> str:
        """At the end of the reply: whatever was held, unclosed, is text."""
        released, self._held = "".join(self._held), []
        return released
