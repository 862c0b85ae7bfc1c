"""Entry embeddings kept on disk by text, so a knowledge file loads in a fraction of
a second however large it is, and an edited file re-embeds only what changed.

Embedding is the whole cost of loading a file (a 1,000-entry file holds ~5,000 texts
to embed, tens of seconds on two cores); every text's vector is kept under a hash of
the text and the model that made it, in one ``.npz`` per model, written atomically.
A kiosk maker who fixes one answer pays for that answer's texts, not the file's.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

log = logging.getLogger(__name__)
FloatArray = npt.NDArray[np.float32]
MAX_ROWS = 50_000  # ~77 MB of 384-float vectors; past it only the newest load's texts stay


class VectorStore:
    """Vectors by text for one embedding model, in ``folder``."""

    def __init__(self, folder: Path, model: str) -> None:
        tag = hashlib.sha256(f"v3\x00{model}".encode()).hexdigest()[:16]
        self.path = folder / f"vectors-{tag}.npz"

    @staticmethod
    def key(text: str) -> bytes:
        return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()

    def _read(self) -> tuple[list[bytes], FloatArray | None]:
        try:
            with np.load(self.path) as data:
                keys, vectors = data["keys"], np.asarray(data["vectors"], dtype=np.float32)
        except FileNotFoundError:
            return [], None
        except (OSError, ValueError, KeyError) as exc:  # a broken file is rebuilt
            log.warning("ignoring the unreadable embedding cache %s: %s", self.path, exc)
            return [], None
        if len(keys) != len(vectors):
            return [], None
        return [bytes(k) for k in keys.tolist()], vectors

    def vectors(self, texts: Sequence[str], embed: Callable[[list[str]], FloatArray]) -> FloatArray:
        """One vector per text: from the store where known, from ``embed`` otherwise
        (and then kept)."""
        if not texts:
            return embed([])
        wanted = [self.key(t) for t in texts]
        keys, stored = self._read()
        row = {k: i for i, k in enumerate(keys)}
        missing = sorted({k: i for i, k in enumerate(wanted) if k not in row}.values())
        fresh = embed([texts[i] for i in missing]) if missing else None
        source = fresh if fresh is not None else stored
        assert source is not None  # every text is either stored or fresh
        out = np.zeros((len(texts), source.shape[1]), dtype=np.float32)
        fresh_row = {wanted[i]: j for j, i in enumerate(missing)}
        for i, k in enumerate(wanted):
            if k in row and stored is not None:
                out[i] = stored[row[k]]
            elif fresh is not None:
                out[i] = fresh[fresh_row[k]]
        if missing and fresh is not None:
            self._write(keys, stored, [wanted[i] for i in missing], fresh, wanted, out)
        return out

    def _write(
        self,
        keys: list[bytes],
        stored: FloatArray | None,
        new_keys: list[bytes],
        new: FloatArray,
        wanted: list[bytes],
        current: FloatArray,
    ) -> None:
        if stored is not None and len(keys) + len(new_keys) <= MAX_ROWS:
            all_keys, vectors = keys + new_keys, np.concatenate([stored, new])
        else:  # first write, or too big: keep what this load uses
            first = {k: i for i, k in enumerate(wanted)}
            all_keys = list(first)
            vectors = current[list(first.values())]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.tmp.npz")
            np.savez(tmp, keys=np.array(all_keys, dtype="S16"), vectors=vectors)
            tmp.replace(self.path)
        except OSError as exc:  # a read-only home: slower next start, nothing worse
            log.warning("cannot cache knowledge embeddings in %s: %s", self.path.parent, exc)
