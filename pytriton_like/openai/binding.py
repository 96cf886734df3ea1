"""Bind a chat or embedding callable so that the OpenAI endpoint serves it.

:func:`bind_chat_model` and :func:`bind_embedding_model` call ``triton.bind()`` with the tensors
of :mod:`.contract` and a callable that wraps yours: it decodes each request, calls yours, and
encodes what it gives. Everything else of ``bind()`` applies (batching, queue policy, priorities,
instances, metrics).
"""

import asyncio
import inspect
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from ..exceptions import PyTritonValidationError
from ..model_config import DynamicBatcher, ModelConfig, Tensor
from .contract import EMBEDDING_OUTPUT, PIECE_OUTPUT, REQUEST_INPUT, TEXT_INPUT, GenerationRequest, Piece

__all__ = ["bind_chat_model", "bind_embedding_model"]

# A text model's callable takes one request at a time, so by default each request is a batch of its
# own: a streaming model's batches stream concurrently (the relay server runs each as a task), and
# Triton's dynamic batcher still applies its queue policy and priorities. An embedding callable
# takes every text of a batch at once.
_DEFAULT_TEXT_BATCH = 1
_DEFAULT_EMBEDDING_BATCH = 64


def bind_chat_model(
    triton: Any,
    model_name: str,
    infer_func: Callable[[GenerationRequest], Any],
    *,
    streaming: Optional[bool] = None,
    config: Optional[ModelConfig] = None,
    model_version: int = 1,
) -> None:
    """Serve ``infer_func`` on ``/v1/chat/completions`` and ``/v1/completions`` as ``model_name``.

    Args:
        triton: the :class:`~pytriton_like.triton.Triton` to bind it to (its config turns the
            endpoint on: ``TritonConfig(allow_openai=True)``).
        model_name: the model name clients send (``model=`` of the openai client).
        infer_func: called with one :class:`GenerationRequest` per choice. A generator (or async
            generator) function yields the answer piece by piece (``str`` or :class:`Piece`) and is
            served streaming; a plain (or ``async``) function returns the whole answer (``str`` or
            :class:`Piece`). Either serves requests with and without ``stream: true``.
        streaming: whether ``infer_func`` streams; by default, whether it is a generator function.
        config: Triton's scheduling options (default: ``ModelConfig(max_batch_size=1)`` with a
            dynamic batcher: each request a batch of its own, so that streams run concurrently,
            with Triton's queue policy and priorities). ``decoupled`` is set from ``streaming``.
            With a larger ``max_batch_size``, the requests of a batch are asked for their next
            piece in turn (a sync generator's steps run one after another).
        model_version: the model's version.

    Raises:
        PyTritonValidationError: ``infer_func`` is not callable; and what ``Triton.bind`` raises.

    Example:
        >>> def chat(request):                                              # doctest: +SKIP
        ...     for word in f"You said: {request.messages[-1]['content']}".split():
        ...         yield word + " "
        >>> bind_chat_model(triton, "tiny-chat", chat)                      # doctest: +SKIP
    """
    if not callable(infer_func):
        raise PyTritonValidationError(f"bind_chat_model: infer_func must be callable, got {type(infer_func).__name__}")
    if streaming is None:
        streaming = _is_generator_function(infer_func)
    config = _config(config, _DEFAULT_TEXT_BATCH, decoupled=streaming)
    if streaming:
        wrapped = _async_stream(infer_func) if _is_async_generator_function(infer_func) else _stream(infer_func)
    else:
        wrapped = _async_answer(infer_func) if _is_coroutine_function(infer_func) else _answer(infer_func)
    triton.bind(
        model_name=model_name,
        infer_func=wrapped,
        inputs=[Tensor(name=REQUEST_INPUT, dtype=bytes, shape=(1,))],
        outputs=[Tensor(name=PIECE_OUTPUT, dtype=bytes, shape=(1,))],
        config=config,
        model_version=model_version,
    )


def bind_embedding_model(
    triton: Any,
    model_name: str,
    infer_func: Callable[[List[str]], Any],
    *,
    config: Optional[ModelConfig] = None,
    model_version: int = 1,
) -> None:
    """Serve ``infer_func`` on ``/v1/embeddings`` as ``model_name``.

    Args:
        triton: the :class:`~pytriton_like.triton.Triton` to bind it to.
        model_name: the model name clients send.
        infer_func: called with a list of texts (those of every request in Triton's batch),
            returns one vector per text: a 2-D array-like of floats, ``[len(texts), dimensions]``.
        config: Triton's scheduling options (default: dynamic batching of up to 64 texts). A
            request with more texts than ``max_batch_size`` is sent as several.
        model_version: the model's version.

    Example:
        >>> def embed(texts):                                               # doctest: +SKIP
        ...     return np.array([[len(t), t.count(" ")] for t in texts], dtype=np.float32)
        >>> bind_embedding_model(triton, "tiny-embed", embed)               # doctest: +SKIP
    """
    if not callable(infer_func):
        raise PyTritonValidationError(
            f"bind_embedding_model: infer_func must be callable, got {type(infer_func).__name__}"
        )
    config = _config(config, _DEFAULT_EMBEDDING_BATCH, decoupled=False)
    if config.max_batch_size < 1 or not config.batching:
        raise PyTritonValidationError("bind_embedding_model: the model needs a batch axis (batching on, max_batch_size >= 1)")
    wrapped = _async_embed(infer_func) if _is_coroutine_function(infer_func) else _embed(infer_func)
    triton.bind(
        model_name=model_name,
        infer_func=wrapped,
        inputs=[Tensor(name=TEXT_INPUT, dtype=bytes, shape=(1,))],
        outputs=[Tensor(name=EMBEDDING_OUTPUT, dtype=np.float32, shape=(-1,))],
        config=config,
        model_version=model_version,
    )


def _config(config: Optional[ModelConfig], max_batch_size: int, decoupled: bool) -> ModelConfig:
    if config is None:
        return ModelConfig(max_batch_size=max_batch_size, batcher=DynamicBatcher(), decoupled=decoupled)
    if not isinstance(config, ModelConfig):
        raise PyTritonValidationError(f"config must be a ModelConfig, got {type(config).__name__}")
    return ModelConfig(
        batching=config.batching, max_batch_size=config.max_batch_size, batcher=config.batcher,
        response_cache=config.response_cache, decoupled=decoupled, model_warmup=config.model_warmup,
    )


def _is_generator_function(func: Callable) -> bool:
    call = getattr(func, "__call__", None)
    return any(inspect.isgeneratorfunction(f) or inspect.isasyncgenfunction(f) for f in (func, call))


def _is_async_generator_function(func: Callable) -> bool:
    return inspect.isasyncgenfunction(func) or inspect.isasyncgenfunction(getattr(func, "__call__", None))


def _is_coroutine_function(func: Callable) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(getattr(func, "__call__", None))


def _decode(request) -> GenerationRequest:
    return GenerationRequest.from_json(request[REQUEST_INPUT].reshape(-1)[0])


def _piece_response(value: Any) -> dict:
    return {PIECE_OUTPUT: np.array([[Piece.of(value).to_json()]], dtype=np.bytes_)}


# Streaming: each request of a batch has its own generator; one step asks each running generator
# for its next piece and sends one response per request (an empty one to a request whose answer
# ended, which the endpoint ignores). A batch of one, the common case, sends nothing extra.


def _stream(func: Callable) -> Callable:
    def stream(requests: Sequence) -> Any:
        generators = []
        try:
            for request in requests:
                generators.append(iter(func(_decode(request))))
            running = set(range(len(generators)))
            while running:
                responses: List[dict] = [{} for _ in generators]
                for index in sorted(running):
                    try:
                        responses[index] = _piece_response(next(generators[index]))
                    except StopIteration:
                        running.discard(index)
                if running:
                    yield responses
        finally:  # ended early (the stream was cancelled, or a generator raised): close the others
            for generator in generators:
                close = getattr(generator, "close", None)
                if close is not None:
                    close()

    return stream


def _async_stream(func: Callable) -> Callable:
    async def stream(requests: Sequence) -> Any:
        generators = [func(_decode(request)) for request in requests]
        running = list(range(len(generators)))
        try:  # ended early (the stream was cancelled, or a generator raised): the others are closed
            while running:
                # the running generators' next pieces, awaited together
                pieces = await asyncio.gather(*(_next_piece(generators[index]) for index in running))
                responses: List[dict] = [{} for _ in generators]
                for index, piece in zip(running, pieces):
                    if piece is not _ENDED:
                        responses[index] = _piece_response(piece)
                running = [index for index, piece in zip(running, pieces) if piece is not _ENDED]
                if running:
                    yield responses
        finally:
            for generator in generators:
                await generator.aclose()

    return stream


_ENDED = object()


async def _next_piece(generator) -> Any:
    try:
        return await generator.__anext__()
    except StopAsyncIteration:
        return _ENDED


def _answer(func: Callable) -> Callable:
    def answer(requests: Sequence) -> List[dict]:
        return [_piece_response(func(_decode(request))) for request in requests]

    return answer


def _async_answer(func: Callable) -> Callable:
    async def answer(requests: Sequence) -> List[dict]:
        return [_piece_response(await func(_decode(request))) for request in requests]

    return answer


def _texts(requests: Sequence) -> List[List[str]]:
    return [[text.decode("utf-8") for text in request[TEXT_INPUT].reshape(-1)] for request in requests]


def _split(vectors: Any, per_request: List[List[str]]) -> List[dict]:
    array = np.asarray(vectors, dtype=np.float32)
    total = sum(len(texts) for texts in per_request)
    if array.ndim != 2 or array.shape[0] != total:
        raise ValueError(f"the embedding callable must return {total} vectors ([{total}, dimensions]), got shape {array.shape}")
    responses, start = [], 0
    for texts in per_request:
        responses.append({EMBEDDING_OUTPUT: array[start : start + len(texts)]})
        start += len(texts)
    return responses


def _embed(func: Callable) -> Callable:
    def embed(requests: Sequence) -> List[dict]:
        per_request = _texts(requests)
        return _split(func([text for texts in per_request for text in texts]), per_request)

    return embed


def _async_embed(func: Callable) -> Callable:
    async def embed(requests: Sequence) -> List[dict]:
        per_request = _texts(requests)
        return _split(await func([text for texts in per_request for text in texts]), per_request)

    return embed
