"""What both workers do with a message, without I/O: requests in, RESULT frames out."""

import inspect
import json
import logging
from typing import Callable, Dict, List, Optional

from ..exceptions import PyTritonUnrecoverableError
from ..proxy.protocol import Flags, Kind, Message, encode_message
from ..proxy.shm import ArenaWriter
from ..proxy.types import Request
from .outputs import OutputChecker, OutputError

__all__ = ["BatchHandler", "DEFAULT_SHM_THRESHOLD"]

logger = logging.getLogger(__name__)

# Tensors from this size on travel through shared memory, smaller ones as frames of the message.
DEFAULT_SHM_THRESHOLD = 64 * 1024
# Triton's request flags (TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END).
SEQUENCE_START = 1
SEQUENCE_END = 2


class BatchHandler:
    """Turns BATCH messages into Requests and the callable's responses into RESULT frames.

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
        # instance name -> what its stub said of itself in HELLO (pid, Triton's shm region)
        self.stubs: Dict[str, Dict] = {}

    def welcome(self, hello: Message) -> list:
        instance = str(hello.extra.get("instance"))
        logger.debug("model %s: instance %s connected", self.model_name, instance)
        self.stubs[instance] = {"pid": hello.extra.get("pid"), "region": hello.extra.get("region")}
        return encode_message(Kind.WELCOME, extra={"shm_threshold": self.shm_threshold})

    @staticmethod
    def requests(message: Message) -> List[Request]:
        requests = [
            Request(
                data=tensors,
                parameters=_parameters(item.get("p")),
                requested_output_names=item.get("q") or None,
            )
            for item, tensors in zip(message.items, message.tensors)
        ]
        if message.items and "c" in message.items[0]:  # a sequence model's batch
            _add_sequence_fields(requests, message.items)
        return requests

    def result(
        self,
        batch_id: int,
        requests: List[Request],
        responses,
        *,
        flags: Flags = Flags.FINAL,
        arena: Optional[ArenaWriter] = None,
        callable_ns: Optional[int] = None,
    ) -> list:
        """RESULT frames for one list of responses; a bad response fails only its request.

        Args:
            callable_ns: time the callable took, carried to the relay's metrics.
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
        items = [self._item(request, response) for request, response in zip(requests, responses)]
        return encode_message(
            Kind.RESULT,
            batch_id,
            items,
            arena=arena,
            threshold=self.shm_threshold,
            flags=flags,
            extra=_timing(callable_ns),
        )

    def failure(self, batch_id: int, error: BaseException, callable_ns: Optional[int] = None) -> list:
        """The RESULT that fails a whole batch; logs the traceback and reports unrecoverable errors."""
        logger.error("model %s: the inference callable failed", self.model_name, exc_info=error)
        if isinstance(error, PyTritonUnrecoverableError):
            self._on_unrecoverable(error)
        return encode_message(
            Kind.RESULT,
            batch_id,
            error=f"{type(error).__name__}: {error}",
            flags=Flags.FINAL,
            extra=_timing(callable_ns),
        )

    def _item(self, request: Request, response) -> tuple:
        try:
            return {}, self._checker.check(response, _batch_size(request), request.requested_output_names)
        except OutputError as exc:
            logger.error("model %s: %s", self.model_name, exc)
            return {"e": f"model {self.model_name!r}: {exc}"}, {}


def _parameters(text: Optional[str]) -> dict:
    # most requests have none: "{}" needs no parser
    return json.loads(text) if text and text != "{}" else {}


def _timing(callable_ns: Optional[int]) -> Optional[Dict[str, int]]:
    """The RESULT header's timing field (protocol.py: ``x.c``)."""
    return None if callable_ns is None else {"c": callable_ns}


def _add_sequence_fields(requests: List[Request], items: List[dict]) -> None:
    for request, item in zip(requests, items):
        flags = int(item.get("g", 0))
        request.sequence_id = item["c"]
        request.sequence_start = bool(flags & SEQUENCE_START)
        request.sequence_end = bool(flags & SEQUENCE_END)


def _batch_size(request: Request) -> Optional[int]:
    for array in request.data.values():
        return array.shape[0] if array.ndim else None
    return None
