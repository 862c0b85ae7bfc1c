"""Knowledge files: what a kiosk or a character knows, in Markdown a person can edit.

```markdown
# The museum (lines before the first "## " are notes for the editor: ignored)

## When does the museum open?
We are open from nine in the morning to five in the evening, Tuesday to Sunday.

## Where is the cafe? | Is there somewhere to eat?
The cafe is on the ground floor, next to the gift shop.
```

Each ``## `` heading starts an entry: a question or a topic. Several phrasings of
it may share the heading, separated by `` | ``. The text under it, up to the next
heading, is the entry's answer as it may be spoken (its lines are joined with
spaces). A folder is read as all of its ``.md`` files, sorted by name.

Markdown as people write it is read as it would be heard: a ``# `` section heading
ends the entry before it (the lines under it, up to the next ``## ``, are notes like
the file's top); list items are said as sentences of their own; rules (``---``),
HTML comments, emphasis marks and link targets are dropped; a heading's closing
``##`` and a byte-order mark are no part of the text.

Everything wrong with a file (missing, not UTF-8, a heading with no answer, an
answer with no heading, no entry at all) is one :class:`KnowledgeError` naming the
file and the line, raised when the file is read: at start, never mid-conversation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from voice.errors import ConfigError

HINT = "Each entry is a '## ' heading line and its answer below it (see docs/knowledge.md)."
# Markdown that must not be read aloud: emphasis marks, inline code, link targets.
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_MARKS = re.compile(r"[*_`]+")
_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d{1,3}[.)])\s+")
_RULE = re.compile(r"^(?:[-*_]\s*){3,}$")
_CLOSING_HASHES = re.compile(r"\s+#+$")
_SECTION = re.compile(r"^#(?:\s|$)")  # "# Tickets"; "#museum" is a hashtag, not a heading


class KnowledgeError(ConfigError):
    """A knowledge file that cannot be used, with the file and line to fix."""

    code = "knowledge_file"


@dataclass(frozen=True)
class Entry:
    """One thing the assistant knows: how it may be asked, and the answer to say."""

    phrasings: tuple[str, ...]  # the heading, split at " | "
    answer: str
    source: str  # "file:line" of the heading, for messages and the benchmark

    @property
    def heading(self) -> str:
        return self.phrasings[0]


def _spoken(text: str) -> str:
    return " ".join(_MARKS.sub("", _LINK.sub(r"\1", text)).split())


def _answer_line(line: str) -> str:
    """One line of an answer as it is said: a list item ends as a sentence, so that
    "- Monday: nine to five" and "- Tuesday: closed" are not run together."""
    item = _LIST_ITEM.match(line)
    if item is None:
        return line
    line = line[item.end() :].rstrip()
    return line if not line or line[-1] in ".!?:;,。！？" else line + "."


def _without_comments(text: str) -> str:
    """HTML comments (editor's notes) blanked out, line breaks kept for the line
    numbers errors give."""
    return _COMMENT.sub(lambda found: "\n" * found.group().count("\n"), text)


def parse_knowledge(text: str, name: str = "<text>") -> list[Entry]:
    """The entries of one file's ``text``; ``name`` is how errors name the file."""
    entries: list[Entry] = []
    heading: tuple[str, ...] | None = None
    heading_line = 0
    body: list[str] = []

    def close() -> None:
        if heading is None:
            return
        answer = _spoken(" ".join(body))
        if not answer:
            raise KnowledgeError(
                f"{name}, line {heading_line}: the entry '{heading[0]}' has no answer.",
                "Write its answer on the lines under the heading.",
            )
        entries.append(Entry(heading, answer, f"{name}:{heading_line}"))

    for number, line in enumerate(_without_comments(text.lstrip("\ufeff")).splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("##") and not stripped.startswith("###"):
            close()
            title = _CLOSING_HASHES.sub("", " " + stripped[2:].strip()).strip()
            phrasings = tuple(p for p in (_spoken(part) for part in title.split("|")) if p)
            if not phrasings:
                raise KnowledgeError(f"{name}, line {number}: a '##' heading with no text.", HINT)
            heading, heading_line, body = phrasings, number, []
        elif _SECTION.match(stripped):
            close()  # a section heading: its lines up to the next entry are notes
            heading, body = None, []
        elif heading is not None:
            if stripped.startswith("###"):
                raise KnowledgeError(
                    f"{name}, line {number}: only '## ' headings start entries; "
                    f"'{stripped[:40]}' would be read aloud as part of an answer.",
                    "Make it a '## ' entry of its own, or a '# ' section heading (notes under it "
                    "are not read).",
                )
            if not _RULE.match(stripped):
                body.append(_answer_line(stripped))
    close()
    return entries


def read_knowledge(path: str | Path) -> list[Entry]:
    """The entries of a Markdown file, or of every ``.md`` file in a folder (by name).
    An empty result, a missing file or an unreadable one is a :class:`KnowledgeError`."""
    source = Path(path)
    if source.is_dir():
        files = sorted(p for p in source.iterdir() if p.suffix.lower() == ".md" and p.is_file())
        if not files:
            raise KnowledgeError(f"knowledge folder {source} has no .md files.", HINT)
    else:
        files = [source]
    entries: list[Entry] = []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8-sig")  # a BOM (Notepad) is no text
        except FileNotFoundError:
            raise KnowledgeError(
                f"knowledge file not found: {file}.",
                "Give the path of a Markdown file or a folder of them (a persona's "
                "path is relative to the persona file).",
            ) from None
        except UnicodeDecodeError as exc:
            line = text_line(file.read_bytes(), exc.start)
            raise KnowledgeError(
                f"{file}, line {line}: not UTF-8 text.", "Save the file as UTF-8."
            ) from None
        except OSError as exc:
            raise KnowledgeError(f"cannot read knowledge file {file}: {exc.strerror}.") from None
        found = parse_knowledge(text, str(file))
        if not found:
            raise KnowledgeError(f"{file}: no entries (no line starts with '## ').", HINT)
        entries.extend(found)
    return entries


def text_line(data: bytes, offset: int) -> int:
    """The 1-based line of byte ``offset`` in ``data``."""
    return data.count(b"\n", 0, offset) + 1
