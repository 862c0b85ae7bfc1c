"""Which entry the user's words ask for, and how sure that is.

Two kinds of signal, because each fails where the other holds (docs/knowledge.md has
the numbers):

- **meaning**: cosines between the words' sentence embedding and the entry's
  phrasings (its heading, split at " | "), its heading with its answer as one text,
  and its answer's best sentence. It finds "I could use a coffee" in "Where is the
  cafe?", which shares no word with it;
- **words**: how much of what the user said, weighted by rarity (IDF over the
  entries, stemmed, stop words dropped), the entry contains. A word no entry has
  ("mummies") counts against every entry, which helps tell a question the file does
  not cover from one it does. A word the entry does not have but a close stand-in
  for ("cab" for "taxi", "kids" for "children": their vectors in the encoder's own
  word-piece table, no model pass) counts for part of its weight, and a synonym the
  table does not know ("loo" for "toilets": ``SYNONYMS``) for all of it.

The score is their weighted sum; the confidence the thresholds use adds the best
entry's lead over the next one, because an absolute score depends on how a file is
written (one-word topic headings score lower than questions) and a clear winner does
not. Embeddings of the entries are computed once per file content and kept in a cache
folder, so a large file loads in a fraction of a second from the second time on.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from voice.knowledge.parse import Entry
from voice.knowledge.store import VectorStore

FloatArray = npt.NDArray[np.float32]

_STOP = """a an the and or but if of to in on at by for with from into about as is are was
were be been being am do does did doing have has had i me my we our us you your it its this
that these those there here what which who whom whose when where why how can could would
should will shall may might must please tell know want like just so some any get got let
lets s t d ll m re ve not no yes there's what's where's i'm i'd i'll it's im one much many
very really also go going okay ok well then actually hi hello hey thanks thank sorry excuse"""
STOP_WORDS = frozenset(_STOP.split())
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Hesitations a transcript keeps ("um, where is the, uh, cafe?"), drawn out or not: no
# entry has them, so as words they counted against every entry (the cafe's words signal
# fell from 1.0 to 0.23), and they blur the sentence's embedding.
_FILLER = re.compile(
    r"(?:,\s*)?\b(?:u+[hm]+|e+r+m*|h+m+|m+h*m+|a+h+|e+h+)\b[,.…]*\s*", re.IGNORECASE
)


def without_fillers(text: str) -> str:
    """The words as asked, hesitations left out; a word in capitals is an acronym ("Where
    is the ER?", "35 MM film"), not a hesitation, and stays."""

    def drop(found: re.Match[str]) -> str:
        word = found.group().strip(" ,.…")
        return found.group() if len(word) > 1 and word.isupper() else " "

    return " ".join(_FILLER.sub(drop, text).split())


class Embeds(Protocol):
    """What retrieval needs of a sentence encoder (voice.embed.Embedder is one; one
    with a ``word_vectors(words)`` method also lends the words signal its stand-ins)."""

    def embed(self, texts: list[str]) -> FloatArray: ...


def stem(word: str) -> str:
    """A light suffix stripper: "tickets"/"ticket", "parking"/"park", "opens"/"open"."""
    for suffix in ("ing", "ies", "es", "ed", "s", "ly"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break
    return word


def words_of(text: str) -> list[str]:
    """The text's words, lower case, stop words and hesitations dropped (unstemmed)."""
    return [w for w in _WORD.findall(without_fillers(text).lower()) if w not in STOP_WORDS]


def terms(text: str) -> list[str]:
    return [stem(w) for w in words_of(text)]


# Words for the same thing in British, American and everyday English, which the
# encoder's word-piece table does not place near each other ("loo" and "toilets" 0.07,
# "pram" and "pushchairs" 0.14): a visitor's word counts as its synonym in an entry.
# Only words with one meaning at a kiosk: not "lift" (a ride too), "line" (a railway's),
# "washroom" (a room to wash in, at an inn), "bathroom" (a hotel room's) or "litter" (of cubs).
_SYNONYM_GROUPS = (
    "toilet toilets loo loos lavatory lavatories restroom restrooms wc gents",
    "pharmacy pharmacies chemist chemists drugstore",
    "pushchair pushchairs buggy buggies pram prams stroller strollers",
    "elevator elevators lifts",
    "atm atms cashpoint cashpoints",
    "nappy nappies diaper diapers",
    "rubbish trash garbage",
    "luggage baggage suitcase suitcases",
    "timetable timetables schedule schedules",
    "pensioner pensioners senior seniors oap oaps",
    "holiday holidays vacation vacations",
    "motorway motorways highway highways freeway freeways",
    "pavement sidewalk",
    "cafe cafeteria canteen",
    "doctor doctors gp gps physician",
    "poorly unwell sick ill",
)
SYNONYMS: dict[str, frozenset[str]] = {
    stem(word): frozenset(stem(w) for w in group.split()) - {stem(word)}
    for group in _SYNONYM_GROUPS
    for word in group.split()
}
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE.split(text) if part.strip()] or [text]


@dataclass(frozen=True)
class Match:
    entry: Entry
    index: int
    score: float  # the weighted sum of the signals, in [0, 1]
    confidence: float  # the score plus its lead over the next entry: what thresholds use
    meaning: float  # best cosine over the entry's phrasings
    words: float  # IDF-weighted share of the user's words the entry contains


@dataclass(frozen=True)
class Weights:
    """How the four signals add up (chosen on the museum set, checked on the hotel
    set; docs/knowledge.md): the best phrasing, the heading with its answer as one
    text, the answer's best sentence, and the words."""

    phrasing: float = 0.25
    joint: float = 0.25
    sentence: float = 0.25
    words: float = 0.25
    # A word the entry lacks counts for an entry word whose static vector is this close
    # (cosine), for (cosine - this) / (1 - this) of its weight; 0 turns stand-ins off.
    # Chosen on the four example sets (docs/knowledge.md): 0.3-0.4 gave the same answers,
    # 0.45 and over fewer.
    similar_word: float = 0.4


class KnowledgeIndex:
    """The entries of one knowledge source, ready to be searched."""

    def __init__(
        self,
        entries: list[Entry],
        embedder: Embeds,
        weights: Weights | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.entries = entries
        self.embedder = embedder
        self.weights = weights or Weights()
        # What is embedded: every phrasing, every answer sentence (rows map back to their
        # entry), and each entry's heading with its answer.
        phrasings = [(i, p) for i, e in enumerate(entries) for p in e.phrasings]
        parts = [(i, s) for i, e in enumerate(entries) for s in sentences(e.answer)]
        joint = [f"{e.heading}. {e.answer}" for e in entries]
        texts = [p for _, p in phrasings] + [s for _, s in parts] + joint
        vectors = self._embed_cached(texts, cache_dir)
        self._phrasing_owner = np.array([i for i, _ in phrasings], dtype=np.int64)
        self._sentence_owner = np.array([i for i, _ in parts], dtype=np.int64)
        self._phrasings = vectors[: len(phrasings)]
        self._sentences = vectors[len(phrasings) : len(phrasings) + len(parts)]
        self._joint = vectors[len(phrasings) + len(parts) :]
        # Words: document frequency over entries (phrasings and answer together).
        self._docs = [set(terms(" ".join((*e.phrasings, e.answer)))) for e in entries]
        df: Counter[str] = Counter(t for doc in self._docs for t in doc)
        n = max(len(entries), 1)
        self._idf = {t: math.log(1 + n / c) for t, c in df.items()}
        self._unseen_idf = math.log(1 + n / 0.5)  # a word no entry has weighs the most
        self._postings: dict[str, list[int]] = {}
        for i, doc in enumerate(self._docs):
            for t in doc:
                self._postings.setdefault(t, []).append(i)
        # Stand-ins: every word of the entries (unstemmed), its vector and its entries.
        self._word_vectors = getattr(embedder, "word_vectors", None)
        owners: dict[str, list[int]] = {}
        for i, e in enumerate(entries):
            for w in set(words_of(" ".join((*e.phrasings, e.answer)))):
                owners.setdefault(w, []).append(i)
        self._vocabulary_owners = list(owners.values())
        self._vocabulary: FloatArray | None = None
        if self._word_vectors is not None and owners and self.weights.similar_word > 0:
            self._vocabulary = self._word_vectors(list(owners))

    def _embed_cached(self, texts: list[str], cache_dir: Path | None) -> FloatArray:
        """Embeddings of ``texts``: from the cache folder's store where known (an
        encoder with ``embed_for_index`` embeds the rest with its build threads)."""
        embed = getattr(self.embedder, "embed_for_index", self.embedder.embed)
        if cache_dir is None:
            return embed(texts)  # type: ignore[no-any-return]
        model = str(getattr(self.embedder, "name", type(self.embedder).__name__))
        return VectorStore(cache_dir, model).vectors(texts, embed)

    def entries_asked_as(self, lines: FloatArray, closeness: float) -> list[int]:
        """The entries one of whose phrasings is within ``closeness`` (cosine) of one of
        ``lines`` (unit vectors): an entry written as the question those lines ask ("Who
        are you? | What is your name?"), in file order."""
        if not len(self._phrasings) or not len(lines):
            return []
        near = np.flatnonzero((self._phrasings @ lines.T).max(axis=1) >= closeness)
        return sorted({int(self._phrasing_owner[row]) for row in near})

    def word_scores(self, text: str) -> FloatArray:
        """For each entry, the IDF-weighted share of the text's words it contains."""
        scores = np.zeros(len(self.entries), dtype=np.float32)
        query = set(terms(text))
        total = sum(self._idf.get(t, self._unseen_idf) for t in query)
        if total <= 0:
            return scores
        for t in query:
            for i in self._postings.get(t, ()):
                scores[i] += self._idf[t]
        scores += self._stand_in_scores(text)
        return scores / np.float32(total)

    def _stand_in_scores(self, text: str) -> FloatArray:
        """For each entry, the weight of the text's words it lacks but has a synonym of
        (in full: "loo" for "toilets") or a close stand-in for (each counted by how
        close, the best stand-in in the entry)."""
        scores = np.zeros(len(self.entries), dtype=np.float32)
        by_term = {stem(w): w for w in words_of(text)}  # one spelling per term
        if not by_term:
            return scores
        floor = self.weights.similar_word
        closeness = None
        if self._vocabulary is not None and self._word_vectors is not None:
            closeness = self._word_vectors(list(by_term.values())) @ self._vocabulary.T
        for n, t in enumerate(by_term):
            credit = np.zeros(len(self.entries), dtype=np.float32)
            if closeness is not None:
                row = closeness[n]
                for v in np.flatnonzero(row > floor):
                    share = (float(row[v]) - floor) / (1.0 - floor)
                    owners = self._vocabulary_owners[v]
                    credit[owners] = np.maximum(credit[owners], share)
            for synonym in SYNONYMS.get(t, ()):
                credit[self._postings.get(synonym, [])] = 1.0
            credit[self._postings.get(t, [])] = 0.0  # the word itself already counted
            scores += self._idf.get(t, self._unseen_idf) * credit
        return scores

    def _best_of(self, owners: npt.NDArray[np.int64], cosines: FloatArray) -> FloatArray:
        best = np.full(len(self.entries), -1.0, dtype=np.float32)
        np.maximum.at(best, owners, cosines)
        return best

    def search(self, text: str, k: int = 3, vector: FloatArray | None = None) -> list[Match]:
        """The ``k`` best entries for ``text``, best first."""
        if not self.entries or not text.strip():
            return []
        if vector is None:
            vector = self.embedder.embed([text])[0]
        w = self.weights
        phrasing = self._best_of(self._phrasing_owner, self._phrasings @ vector)
        sentence = self._best_of(self._sentence_owner, self._sentences @ vector)
        words = self.word_scores(text)
        combined = (
            w.phrasing * phrasing + w.joint * (self._joint @ vector) + w.sentence * sentence
            + w.words * words
        )  # fmt: skip
        order = np.argsort(-combined)
        runner_up = float(combined[order[1]]) if len(order) > 1 else 0.0
        matches = []
        for rank, i in enumerate(order[:k]):
            score = float(combined[i])
            lead = score - (runner_up if rank == 0 else float(combined[order[0]]))
            matches.append(
                Match(self.entries[i], int(i), score, score + lead, float(phrasing[i]),
                      float(words[i]))
            )  # fmt: skip
        return matches
