"""Draining: a running tritonserver reports not ready while it keeps serving every model.

tritonserver 2.51 has no call that turns its readiness off. With strict readiness (its default)
it reports ready only while every model it knows is ready or was unloaded (a model that is
loading or unloading makes it not ready for that time only). So the drain loads a model that
cannot load: its config names a backend that does not exist. That load fails at once and starts
no process; the model stays ``UNAVAILABLE`` with the error as its reason, and from then on
``/v2/health/ready`` answers 400 and gRPC ``ServerReady`` says false, while inference on every
other model goes on as before. Nothing loads or unloads that model again, so the server stays
not ready until it exits (measured on the bundled 2.51; docs/deployment.md).
"""

import logging
import pathlib
from typing import Optional

from ..console import Console

from .control import ControlError, ServerControl
from .signals import SignalSafeEvent

__all__ = ["DRAINING_MODEL", "report_not_ready", "drain"]

logger = logging.getLogger(__name__)

# The model whose failed load marks a draining server; it shows in the repository index meanwhile.
DRAINING_MODEL = "pytriton_like_draining"
_LOAD_TIMEOUT_S = 10

_CONFIG = f'''# Written when this server began to drain: a model that cannot load keeps the server not ready.
name: "{DRAINING_MODEL}"
backend: "{DRAINING_MODEL}"
max_batch_size: 0
'''


def report_not_ready(control: ServerControl, repository: pathlib.Path) -> bool:
    """Make the server of ``control`` report not ready from now on; True if it does.

    Args:
        control: the running server.
        repository: a model repository of that server to write the draining model into.
    """
    model_dir = repository / DRAINING_MODEL
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(_CONFIG, encoding="utf-8")
    try:
        control.load(DRAINING_MODEL, _LOAD_TIMEOUT_S)
    except ControlError as exc:
        logger.debug("the draining model failed to load, as it should: %s", exc)
    return not control.server_ready()


def drain(
    seconds: float,
    control: Optional[ServerControl],
    strict_readiness: Optional[bool],
    repository: pathlib.Path,
    console: Console,
    over: SignalSafeEvent,
) -> None:
    """Report not ready (when the server can) and go on serving for ``seconds``, or until ``over`` is set.

    Args:
        control: the server's control calls (``None``: no HTTP endpoint, so no report).
        strict_readiness: ``TritonConfig.strict_readiness`` (False: the report cannot work).
        repository: the workspace's model repository.
    """
    if control is None:
        logger.warning("draining without reporting not ready: that needs the HTTP endpoint (allow_http=False)")
    elif strict_readiness is False:
        logger.warning("draining without reporting not ready: that needs strict_readiness (False here)")
    elif not report_not_ready(control, repository):
        logger.warning("draining, but tritonserver still reports ready")
    console.say("draining: serving what comes for %.1f s before stopping (a second signal stops at once)", seconds)
    over.wait(seconds)
