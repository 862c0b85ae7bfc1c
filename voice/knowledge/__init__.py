"""Grounded answers: what a kiosk or a character knows (Markdown files), the entry a
user's words ask for (retrieval), and whether to say it as written, say the
persona's ``unknown_reply``, or let the model talk (small talk). See docs/knowledge.md."""
