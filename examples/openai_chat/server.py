#!/usr/bin/env python3
"""Serve tiny-chat (a streaming chat model) and tiny-embed (an embedding model) on the OpenAI API.

Both are deterministic toys standing in for real models: tiny-chat answers word by word,
tiny-embed turns a text into a 4-number vector. Requests to the OpenAI endpoint go through
tritonserver (its dynamic batcher, queue and metrics) to these callables in this process.
Run it, then call it with client.py (the openai package) or curl:

    python server.py --api-key sk-local
    python client.py --api-key sk-local
"""

import argparse
import logging

import numpy as np

from pytriton_like.model_config import ModelConfig
from pytriton_like.openai import GenerationRequest, Piece, bind_chat_model, bind_embedding_model
from pytriton_like.triton import Triton, TritonConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.openai_chat.server")


def tiny_chat(request: GenerationRequest):
    """Answers the last user message word by word, as a language model streams its tokens.

    ``request.messages`` holds the chat (``request.prompt`` a /v1/completions prompt);
    ``max_tokens`` and ``stop`` are honoured; the prompt's size is reported with the first piece.
    """
    if request.messages is not None:
        question = next((m["content"] for m in reversed(request.messages) if m["role"] == "user"), "")
        prompt_words = sum(len(m["content"].split()) for m in request.messages)
    else:
        question, prompt_words = request.prompt, len(request.prompt.split())
    words = f"You asked about {question!r}; a tiny model can only repeat it.".split()
    limit = request.max_tokens if request.max_tokens is not None else len(words)
    for index, word in enumerate(words[:limit]):
        text = word if index == 0 else " " + word
        if any(stop in text for stop in request.stop):
            yield Piece("", tokens=0, finish_reason="stop")
            return
        yield Piece(text, tokens=1, prompt_tokens=prompt_words if index == 0 else None)


def tiny_embed(texts):
    """One vector per text: its length, its words, its vowels and its capitals (a stand-in for a real encoder)."""
    return np.array(
        [[len(t), len(t.split()), sum(c in "aeiou" for c in t.lower()), sum(c.isupper() for c in t)] for t in texts],
        dtype=np.float32,
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--openai-port", type=int, default=None, help="the OpenAI endpoint's port (default 9000)")
    parser.add_argument("--openai-address", default=None, help="the OpenAI endpoint's address (default: every interface)")
    parser.add_argument("--http-port", type=int, default=None, help="Triton's HTTP port (default 8000)")
    parser.add_argument("--grpc-port", type=int, default=None, help="Triton's gRPC port (default 8001)")
    parser.add_argument("--metrics-port", type=int, default=None, help="Triton's metrics port (default 8002)")
    parser.add_argument("--api-key", default=None, help="require this key (Authorization: Bearer ...)")
    args = parser.parse_args()
    config = TritonConfig(
        allow_openai=True, openai_port=args.openai_port, openai_address=args.openai_address,
        openai_api_key=args.api_key, http_port=args.http_port, grpc_port=args.grpc_port,
        metrics_port=args.metrics_port,
    )
    with Triton(config=config) as triton:
        # a streaming model; by default each request is a batch of its own, and the batches stream concurrently
        bind_chat_model(triton, "tiny-chat", tiny_chat)
        bind_embedding_model(triton, "tiny-embed", tiny_embed, config=ModelConfig(max_batch_size=64))
        logger.info("serving tiny-chat and tiny-embed; stop with Ctrl-C")
        triton.serve()


if __name__ == "__main__":
    main()
