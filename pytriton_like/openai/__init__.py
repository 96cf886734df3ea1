"""Serve bound callables on an OpenAI-compatible endpoint (docs/openai.md).

Turn the endpoint on with ``TritonConfig(allow_openai=True)`` and bind models with
:func:`bind_chat_model` (chat and completions) and :func:`bind_embedding_model` (embeddings).
The endpoint runs in a process of its own, so your process loads neither aiohttp nor h2 for it.
"""

from .binding import bind_chat_model, bind_embedding_model
from .contract import GenerationRequest, Piece, count_tokens

__all__ = ["bind_chat_model", "bind_embedding_model", "GenerationRequest", "Piece", "count_tokens"]
