"""``bind()``, written once for ``Triton`` and ``RemoteTriton`` (both inherit :class:`Binder`)."""

from typing import Callable, List, Optional, Sequence, Union

from .model_config import ModelConfig, Tensor
from .models.bindings import Bindings
from .models.model import Model
from .models.worker_options import WorkerOptions

__all__ = ["Binder"]


class Binder:
    """``bind()`` (a mixin: the class sets ``_bindings`` and says, in the methods below, how a model
    is tagged, traced and added)."""

    _bindings: Bindings

    def bind(
        self,
        model_name: str,
        infer_func: Union[Callable, Sequence[Callable]],
        inputs: Sequence[Tensor],
        outputs: Sequence[Tensor],
        model_version: int = 1,
        config: Optional[ModelConfig] = None,
        strict: bool = False,
        trace_config: Optional[List[str]] = None,
        workers: int = 1,
        worker_options: Optional[WorkerOptions] = None,
    ) -> None:
        """Serve ``infer_func`` as model ``model_name``.

        Bound before the server runs (``run()``, ``connect()``), the model is loaded then; bound
        while it runs, at once. Bound while tritonserver is being started again after it died, the
        load waits for it (up to 120 s).

        Args:
            model_name: the name clients call the model by.
            infer_func: a callable taking a list of requests and returning one dict of outputs per
                request, or a list of such callables: one model instance per callable, and
                Triton spreads concurrent batches over them.
            inputs: specs of the inputs, in the order clients pass them (unnamed: ``INPUT_1``...).
            outputs: specs of the outputs (unnamed: ``OUTPUT_1``...).
            model_version: version number of the model. Binding a name again with another version
                serves both (same inputs, outputs, config and number of callables); a client that
                names no version gets the highest one that is ready.
            config: scheduling options (default ``ModelConfig()``; copied at bind).
            strict: fail a request whose outputs differ from ``outputs`` (docs/inference_callable.md).
            trace_config: Triton's trace settings for this model's OpenTelemetry spans in your
                process (``["mode=opentelemetry", "opentelemetry,url=...", ...]``); by default
                ``TritonConfig.trace_config``. See docs/tracing.md.
            workers: how many processes run ``infer_func``. The default, 1, means "in your
                process": the callable runs on a thread of this process per instance, sharing its
                memory (and its GIL). With N > 1, each of N worker processes has its own
                interpreter and is one model instance: Python that holds the GIL uses N cores. The
                callable is pickled to each (or inherited, with ``start_method="fork"``); an
                object's ``setup_worker(worker)`` method runs in each before it is ready.
                See docs/workers.md.
            worker_options: how the worker processes start and restart (:class:`WorkerOptions`:
                start method, devices, setup timeout, restarts); only with ``workers`` > 1.

        Raises:
            PyTritonValidationError: a bad name, tensor spec or callable (or a list with ``workers``
                > 1), or a version whose configuration differs from the versions bound already.
            PyTritonInvalidOperationError: this name and version are bound already, the name is a
                model of the model repository, or the server stopped.
            PyTritonServerError: bound while the server runs, and the server failed to load it.
        """
        model = self._bindings.new_model(
            model_name, infer_func, inputs, outputs, model_version, config,
            strict=strict,
            trace_config=trace_config if trace_config is not None else self._default_trace_config(),
            cache_configured=self._cache_configured(),
            tag=self._next_tag(),
            workers=workers,
            worker_options=worker_options,
        )
        self._add_model(model)

    def _default_trace_config(self) -> Optional[List[str]]:
        """The trace settings of a model bound without its own."""
        return None

    def _cache_configured(self) -> Optional[bool]:
        """Whether the server has a response cache (None: not known here, unchecked)."""
        return None

    def _next_tag(self) -> str:
        """A short name, unique in this process, for the next model's sockets and shared memory."""
        raise NotImplementedError

    def _add_model(self, model: Model) -> None:
        """Add the checked ``model`` to the bindings, and load it if the server runs."""
        raise NotImplementedError
