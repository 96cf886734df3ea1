"""``TritonLifecyclePolicy``: when ``Triton`` starts the server (PyTriton's policy; docs/lifecycle_policy.md)."""

import dataclasses
import enum

__all__ = ["TritonLifecyclePolicy", "DefaultTritonLifecyclePolicy", "VertextAILifecyclePolicy", "TritonState"]


@dataclasses.dataclass
class TritonLifecyclePolicy:
    """When the server starts and where bound models' repository entries live (PyTriton's policy).

    Args:
        launch_triton_on_startup: start tritonserver when the ``with Triton()`` block is entered;
            models bound afterwards load at once. False: it starts at ``run()``/``serve()`` and
            loads every model bound until then in one go.
        local_model_store: the entries of bound models are written to the local model store
            before the server starts (what Vertex AI needs: the server must hold its models when
            it reports ready). pytriton_like always writes them locally for a server it starts,
            so this changes nothing for ``Triton``; ``RemoteTriton`` sends them through the
            server's model-repository API.
    """

    launch_triton_on_startup: bool = True
    local_model_store: bool = False


DefaultTritonLifecyclePolicy = TritonLifecyclePolicy()
"""The policy ``Triton`` takes by default: the server starts as the ``with Triton()`` block is entered."""
VertextAILifecyclePolicy = TritonLifecyclePolicy(launch_triton_on_startup=False, local_model_store=True)
"""The policy ``Triton`` takes when ``config.allow_vertex_ai`` is set and none is given (PyTriton's name)."""


class TritonState(enum.Enum):
    """Where a ``Triton`` is in its life: bound only, serving, stopping, stopped (for good)."""

    NEW = "new"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
