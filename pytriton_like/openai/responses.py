"""The OpenAI objects the endpoint answers with, built from the pieces the models gave.

Chat: ``chat.completion`` and, streamed, ``chat.completion.chunk`` events. Completions:
``text_completion`` (the same object streamed). Embeddings: a ``list`` of ``embedding``.
Usage counts what the callables reported with their pieces, or the words (:func:`count_tokens`).
"""

import base64
import json
import struct
import time
import uuid
from typing import Any, Dict, List, Optional, Sequence

from .contract import GenerationRequest, Piece, count_tokens

__all__ = ["Choice", "Reply", "event", "DONE_EVENT", "embeddings_body"]

DONE_EVENT = b"data: [DONE]\n\n"
_PLACEHOLDER = "\x00"  # stands for a piece's text in the event made once per choice
_PLACEHOLDER_JSON = b'"\\u0000"'


def event(data: Dict[str, Any]) -> bytes:
    """One server-sent event carrying ``data`` as JSON."""
    return b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n"


class Choice:
    """What one choice's model answered so far."""

    def __init__(self, request: GenerationRequest):
        self.request = request
        self.index = 0  # its place in the answer, set by Reply
        self._texts: List[str] = []
        self.tokens = 0
        self._prompt_tokens: Optional[int] = None
        self._finish: Optional[str] = None

    def add(self, piece: Piece) -> None:
        self._texts.append(piece.text)
        self.tokens += piece.tokens if piece.tokens is not None else count_tokens(piece.text)
        if piece.prompt_tokens is not None:
            self._prompt_tokens = piece.prompt_tokens
        if piece.finish_reason is not None:
            self._finish = piece.finish_reason

    @property
    def text(self) -> str:
        return "".join(self._texts)

    @property
    def finish_reason(self) -> str:
        if self._finish is not None:
            return self._finish
        limit = self.request.max_tokens
        return "length" if limit is not None and self.tokens >= limit else "stop"

    @property
    def prompt_tokens(self) -> int:
        if self._prompt_tokens is not None:
            return self._prompt_tokens
        request = self.request
        if request.prompt is not None:
            return count_tokens(request.prompt)
        return sum(count_tokens(message["content"]) for message in request.messages or ())


class Reply:
    """The answer to one chat or completion request, whole or as chunks.

    Args:
        chat: a chat completion (else a text completion).
        choices: one per :class:`GenerationRequest` of the request, in their order.
    """

    def __init__(self, chat: bool, model: str, requests: Sequence[GenerationRequest]):
        self.chat = chat
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.choices = [Choice(request) for request in requests]
        for index, choice in enumerate(self.choices):
            choice.index = index
        self._piece_halves: Dict[int, List[bytes]] = {}

    def usage(self) -> Dict[str, int]:
        # the prompt counts once per prompt, whatever n is
        prompt = sum(choice.prompt_tokens for choice in self.choices if choice.request.choice == 0)
        completion = sum(choice.tokens for choice in self.choices)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    def body(self) -> Dict[str, Any]:
        """The whole answer (``stream: false``)."""
        if self.chat:
            choices = [
                {"index": c.index, "message": {"role": "assistant", "content": c.text}, "logprobs": None,
                 "finish_reason": c.finish_reason}
                for c in self.choices
            ]
        else:
            choices = [
                {"index": c.index, "text": c.text, "logprobs": None, "finish_reason": c.finish_reason}
                for c in self.choices
            ]
        return {**self._head("chat.completion" if self.chat else "text_completion"), "choices": choices,
                "usage": self.usage()}

    def first_chunk(self, choice: Choice) -> bytes:
        """A chat stream's first event of a choice: the role (OpenAI's streams begin so)."""
        return self._chunk(choice, {"role": "assistant", "content": ""}, None)

    def piece_chunk(self, choice: Choice, piece: Piece) -> bytes:
        """The event of one piece (the choice's event made once, with the text put in its place)."""
        halves = self._piece_halves.get(choice.index)
        if halves is None:
            delta = {"content": _PLACEHOLDER} if self.chat else _PLACEHOLDER
            halves = self._piece_halves[choice.index] = self._chunk(choice, delta, None).split(_PLACEHOLDER_JSON)
        if len(halves) != 2:  # the placeholder appears elsewhere too (in the model's name): the slow way
            return self._chunk(choice, {"content": piece.text} if self.chat else piece.text, None)
        return halves[0] + json.dumps(piece.text).encode() + halves[1]

    def last_chunk(self, choice: Choice) -> bytes:
        """The event that ends a choice, with its finish reason."""
        return self._chunk(choice, {} if self.chat else "", choice.finish_reason)

    def usage_chunk(self) -> bytes:
        """The event after every choice ended, for ``stream_options: {"include_usage": true}``."""
        return event({**self._head(self._chunk_object()), "choices": [], "usage": self.usage()})

    def _chunk(self, choice: Choice, delta: Any, finish_reason: Optional[str]) -> bytes:
        if self.chat:
            item = {"index": choice.index, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        else:
            item = {"index": choice.index, "text": delta, "logprobs": None, "finish_reason": finish_reason}
        return event({**self._head(self._chunk_object()), "choices": [item]})

    def _chunk_object(self) -> str:
        return "chat.completion.chunk" if self.chat else "text_completion"

    def _head(self, kind: str) -> Dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}


def embeddings_body(model: str, vectors: Sequence[Sequence[float]], texts: Sequence[str], base64_encoded: bool) -> Dict[str, Any]:
    """The answer of ``POST /v1/embeddings``: vectors as float lists, or base64 of little-endian float32."""
    data = []
    for index, vector in enumerate(vectors):
        if base64_encoded:
            value: Any = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
        else:
            value = list(vector)
        data.append({"object": "embedding", "index": index, "embedding": value})
    tokens = sum(count_tokens(text) for text in texts)
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}
