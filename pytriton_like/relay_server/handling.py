"""What both relay servers do with a message, without I/O: requests in, RESULT parts out."""

import inspect
import logging
from typing import Callable, List, Optional, Tuple

from ..exceptions import PyTritonUnrecoverableError
from ..proxy.types import Request
from ..relay.protocol import (
    PROTOCOL_VERSION,
    Flags,
    Kind,
    ProtocolError,
    encode_header,
    encode_plain_result,
    encode_result,
    failed_result,
    plain_outputs,
    read_header,
)
from .outputs import OutputChecker, OutputError

__all__ = ["BatchHandler", "DEFAULT_SHM_THRESHOLD", "Flag"]

logger = logging.getLogger(__name__)

# Tensors from this size on travel through shared memory, smaller ones inline in the message.
DEFAULT_SHM_THRESHOLD = 64 * 1024


class Flag:
    """Whether a relay server handles a batch; a worker process's server gets a shared one instead,
    which the parent reads (``multiprocessing.RawValue``)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = False


class BatchHandler:
    """Turns the callable's responses into RESULT messages, and answers HELLO.

    Args:
        on_unrecoverable: called with the error when the callable raises PyTritonUnrecoverableError.
    """

    def __init__(
        self,
        model_name: str,
        checker: OutputChecker,
        on_unrecoverable: Callable[[BaseException], None],
        shm_threshold: int = DEFAULT_SHM_THRESHOLD,
    ):
        self.model_name = model_name
        self._checker = checker
        self._on_unrecoverable = on_unrecoverable
        self.shm_threshold = shm_threshold
        dtypes = checker.plain_dtypes()
        self._plain = None if dtypes is None else plain_outputs(dtypes)

    def welcome(self, body) -> Tuple[bytes, Optional[int]]:
        """The answer to a HELLO: WELCOME, or a FAILED one naming a protocol the relay server does not
        speak; and the number of batch slots the backend instance uses (None when refused)."""
        version = int.from_bytes(bytes(body[:2]), "little") if len(body) >= 2 else None
        if version != PROTOCOL_VERSION:
            error = (
                f"the backend speaks relay protocol version {version}, this pytriton_like speaks"
                f" {PROTOCOL_VERSION}: the workspace's backend and the library differ"
            )
            logger.error("model %s: %s", self.model_name, error)
            return encode_header(Kind.WELCOME, flags=Flags.FAILED, text=error), None
        header = read_header(body)
        logger.debug("model %s: instance %s connected (pid %d)", self.model_name, header.text, header.value)
        if not 0 < header.count <= 1024:
            raise ProtocolError(f"a HELLO with {header.count} batch slots")
        return encode_header(Kind.WELCOME, value=self.shm_threshold), header.count

    def result(
        self,
        batch_id: int,
        slot: int,
        requests: List[Request],
        responses,
        *,
        final: bool = True,
        arena=None,
        callable_ns: int = 0,
    ):
        """RESULT parts for one list of responses; a bad response fails only its request.

        Returns the parts and whether ``arena`` was replaced (its descriptor goes along).
        """
        if not isinstance(responses, (list, tuple)):
            hint = ""
            if inspect.isgenerator(responses) or inspect.isasyncgen(responses):
                hint = "; a generator streams responses only with ModelConfig(decoupled=True)"
            raise TypeError(
                f"the inference callable must return a list with one dict of outputs per request,"
                f" got {type(responses).__name__}{hint}"
            )
        if len(responses) != len(requests):
            raise ValueError(
                f"the inference callable returned {len(responses)} responses for {len(requests)} requests"
            )
        if self._plain is not None and (arena is None or arena.pending_fd is None):
            parts = encode_plain_result(batch_id, slot, requests, responses, self._plain, threshold=self.shm_threshold,
                                        callable_ns=callable_ns, final=final)
            if parts is not None:
                return parts, False
        items = [self._item(request, response) for request, response in zip(requests, responses)]
        return encode_result(
            batch_id, slot, items, arena=arena, threshold=self.shm_threshold, callable_ns=callable_ns, final=final
        )

    def failure(self, batch_id: int, slot: int, error: BaseException, callable_ns: int = 0) -> bytes:
        """The RESULT that fails a whole batch; logs the traceback and reports unrecoverable errors."""
        logger.error("model %s: the inference callable failed", self.model_name, exc_info=error)
        if isinstance(error, PyTritonUnrecoverableError):
            self._on_unrecoverable(error)
        return failed_result(batch_id, slot, f"{type(error).__name__}: {error}", callable_ns)

    def _item(self, request: Request, response):
        try:
            return self._checker.check(response, _batch_size(request), request.requested_output_names)
        except OutputError as exc:
            logger.error("model %s: %s", self.model_name, exc)
            return f"model {self.model_name!r}: {exc}"


def _batch_size(request: Request) -> Optional[int]:
    for array in request.data.values():
        return array.shape[0] if array.ndim else None
    return None
