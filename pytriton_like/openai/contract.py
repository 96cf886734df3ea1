"""What a model served on the OpenAI endpoint looks like to Triton, and what its callable receives.

A *text model* (chat and completions) has one BYTES input, ``openai_request`` (one JSON object
per request: the messages or the prompt and the sampling parameters), and one BYTES output,
``openai_piece`` (one JSON object per response: a piece of text and what the callable reported
with it). Streaming text models are decoupled: one response per piece. An *embedding model* has
a BYTES input ``openai_input`` (one text per row of the batch axis) and an FP32 output
``openai_embedding`` (one vector per row).

The endpoint recognises a bound model by these names (:func:`catalog`); the helpers of
:mod:`pytriton_like.openai.binding` declare them. The JSON objects are internal: callables see
:class:`GenerationRequest` and return ``str`` or :class:`Piece`.
"""

import dataclasses
import enum
import json
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple

__all__ = [
    "GenerationRequest",
    "Piece",
    "ModelKind",
    "OpenAIModel",
    "catalog",
    "catalog_to_json",
    "catalog_from_json",
    "count_tokens",
    "REQUEST_INPUT",
    "PIECE_OUTPUT",
    "TEXT_INPUT",
    "EMBEDDING_OUTPUT",
    "FINISH_REASONS",
]

REQUEST_INPUT = "openai_request"
PIECE_OUTPUT = "openai_piece"
TEXT_INPUT = "openai_input"
EMBEDDING_OUTPUT = "openai_embedding"
FINISH_REASONS = ("stop", "length")


@dataclasses.dataclass(frozen=True)
class GenerationRequest:
    """What a text model's callable receives: one request of one choice.

    Attributes:
        model: the model name the client asked for.
        messages: the chat messages (``[{"role": "user", "content": "Hi"}, ...]``, each content a
            string), or ``None`` for a request to ``/v1/completions``.
        prompt: the prompt of a request to ``/v1/completions``, or ``None`` for a chat request.
        max_tokens: the most tokens the answer may have (``max_tokens`` or
            ``max_completion_tokens``), or ``None``.
        temperature: the sampling temperature, ``None`` when not given.
        top_p: the nucleus-sampling probability mass, ``None`` when not given.
        stop: the stop sequences (empty when none): the callable ends its answer before any of them.
        seed: the sampling seed, ``None`` when not given.
        n: how many choices the client asked for; each is a request of its own.
        choice: which of them this one is (0 to ``n - 1``).
        extra: the other fields of the request body the endpoint does not interpret
            (``presence_penalty``, ``user``, fields sent with the openai client's ``extra_body``...).
    """

    model: str
    messages: Optional[Tuple[Mapping[str, str], ...]] = None
    prompt: Optional[str] = None
    max_tokens: Optional[int] = None
    temperature: Optional[float] = None
    top_p: Optional[float] = None
    stop: Tuple[str, ...] = ()
    seed: Optional[int] = None
    n: int = 1
    choice: int = 0
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def to_json(self) -> bytes:
        """The request as it travels to the model (internal)."""
        fields = {field: getattr(self, field) for field in _REQUEST_FIELDS}  # not asdict(): no deep copies
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "GenerationRequest":
        """The request a model received (internal).

        Args:
            data: the request as :meth:`to_json` wrote it.
        """
        fields = json.loads(data)
        if fields.get("messages") is not None:
            fields["messages"] = tuple(fields["messages"])
        fields["stop"] = tuple(fields.get("stop") or ())
        return cls(**fields)


_REQUEST_FIELDS = tuple(field.name for field in dataclasses.fields(GenerationRequest))


@dataclasses.dataclass(frozen=True)
class Piece:
    """A piece of an answer with what the callable knows about it; a plain ``str`` is a piece too.

    Attributes:
        text: the text of the piece.
        tokens: how many tokens the piece counts for ``usage.completion_tokens`` (default: its
            words, :func:`count_tokens`).
        prompt_tokens: how many tokens the prompt counted (given once, e.g. with the first piece;
            default: the words of the prompt or of the messages' contents).
        finish_reason: ``"stop"`` or ``"length"``, given with the last piece (default: ``"length"``
            when the answer counted ``max_tokens`` tokens, else ``"stop"``).

    Raises:
        TypeError: ``text`` is not a ``str``.
        ValueError: ``finish_reason`` is neither ``"stop"`` nor ``"length"``.

    Example:
        >>> def chat(request):                                              # doctest: +SKIP
        ...     yield Piece("Hello", tokens=1, prompt_tokens=12)
        ...     yield Piece(" world", tokens=1, finish_reason="stop")
    """

    text: str = ""
    tokens: Optional[int] = None
    prompt_tokens: Optional[int] = None
    finish_reason: Optional[str] = None

    def __post_init__(self):
        if not isinstance(self.text, str):
            raise TypeError(f"Piece.text must be a str, got {type(self.text).__name__}")
        if self.finish_reason is not None and self.finish_reason not in FINISH_REASONS:
            raise ValueError(f"Piece.finish_reason must be one of {', '.join(FINISH_REASONS)}, got {self.finish_reason!r}")

    @classmethod
    def of(cls, value: Any) -> "Piece":
        """``value`` (a ``str`` or a ``Piece``) as a Piece.

        Args:
            value: what the callable gave.

        Raises:
            TypeError: ``value`` is neither a ``str`` nor a ``Piece``.
        """
        if isinstance(value, Piece):
            return value
        if isinstance(value, str):
            return cls(text=value)
        raise TypeError(f"a text model's callable must give str or Piece values, got {type(value).__name__}")

    def to_json(self) -> bytes:
        """The piece as it travels back to the endpoint (internal): only the fields set."""
        fields = {"text": self.text}
        for name in ("tokens", "prompt_tokens", "finish_reason"):
            value = getattr(self, name)
            if value is not None:
                fields[name] = value
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "Piece":
        """The piece the endpoint received (internal).

        Args:
            data: the piece as :meth:`to_json` wrote it.
        """
        return cls(**json.loads(data))


def count_tokens(text: str) -> int:
    """The token count used when a callable reports none: the words of ``text`` (split on whitespace).

    Args:
        text: the text to count.

    Example:
        >>> count_tokens("You asked: hello")
        3
    """
    return len(text.split())


class ModelKind(enum.Enum):
    """What a model served on the OpenAI endpoint does."""

    TEXT = "text"  # /v1/chat/completions and /v1/completions
    EMBEDDING = "embedding"  # /v1/embeddings


@dataclasses.dataclass(frozen=True)
class OpenAIModel:
    """A bound model the endpoint serves, as the endpoint needs to know it.

    Attributes:
        streaming: whether it is decoupled (one response per piece).
        max_batch_size: Triton's ``max_batch_size`` (0: no batch axis).
    """

    name: str
    kind: ModelKind
    streaming: bool
    max_batch_size: int


def catalog(configs: Iterable[Any]) -> Dict[str, OpenAIModel]:
    """The models of ``configs`` (resolved model configs: name, inputs, outputs...) that follow a
    contract of this module, by name."""
    found = {}
    for config in configs:
        inputs = {spec.name for spec in config.inputs}
        outputs = {spec.name for spec in config.outputs}
        if REQUEST_INPUT in inputs and PIECE_OUTPUT in outputs:
            kind = ModelKind.TEXT
        elif TEXT_INPUT in inputs and EMBEDDING_OUTPUT in outputs:
            kind = ModelKind.EMBEDDING
        else:
            continue
        batch = config.max_batch_size if config.batching else 0
        found[config.model_name] = OpenAIModel(config.model_name, kind, bool(config.decoupled), batch)
    return found


def catalog_to_json(models: Dict[str, OpenAIModel]) -> list:
    """The models as JSON values (for the endpoint's process)."""
    return [
        {"name": m.name, "kind": m.kind.value, "streaming": m.streaming, "max_batch_size": m.max_batch_size}
        for m in models.values()
    ]


def catalog_from_json(items: list) -> Dict[str, OpenAIModel]:
    """The models :func:`catalog_to_json` wrote, by name."""
    return {
        item["name"]: OpenAIModel(item["name"], ModelKind(item["kind"]), item["streaming"], item["max_batch_size"])
        for item in items
    }
