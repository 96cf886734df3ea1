"""The supervision tree of a ``Triton``: every process it starts is supervised, and comes back when it dies.

::

    the run's supervisor (TritonConfig.max_restarts within restart_window_secs)
    ├── tritonserver                      (server/child.py)
    ├── the OpenAI endpoint's process     (openai/server.py)    
    └── a pool per model bound with workers=N > 1          (models/worker_pool.py)
        └── its supervisor (WorkerOptions.max_restarts within restart_window_s)
            └── worker process 0 … N-1

Each node is a :class:`Supervisor` with a :class:`RestartPolicy`; each of its children a
:class:`Child` (start, ready, stop, how it ended) that it keeps one :class:`ChildRecord` of (a
:class:`ChildState` and named transitions). When a child exits without being stopped, its
supervisor starts it again: at once if it had served steadily, else after a back-off (the policy
says both). Restarts are counted per supervisor, all its children together (Erlang/OTP's
restart intensity); past the policy's bound, or when one child's restarts fail to serve a few
times in a row, the supervisor gives up. What that means, once per level:

- **a pool gives up**: its worker processes are stopped, and the pool exits as one child of the
  run, with the cause it saw; the run starts it again (all its worker processes anew) as it
  restarts any child, counting it in its own bound. While none of a model's worker processes
  serves, the model reports not ready (models/availability.py).
- **the run gives up**: ``serve()`` raises ``PyTritonServerError`` with the cause and the end of
  tritonserver's log, and everything stops, so that an orchestrator (systemd, Kubernetes) takes
  over; ``Triton.is_alive()`` says False from then on. (``RemoteTriton``: ``serve()`` raises too.)

Every spawn runs on the tree's one thread (watcher.py), which lives until the run's supervisor is
closed, so that a parent-death signal tied to the spawning thread (tritonserver's, the worker
processes') lasts as long as the supervision; the wait for a child to serve runs on a thread of
its own, so that a slow start never keeps the tree from seeing another child's exit. Each exit
and restart is logged at ERROR with how the child ended (its exit code or signal, how long it
served, and what it printed last where that helps).
"""

from .child import Child, ChildRecord, ChildState
from .policy import RestartPolicy, describe_exit
from .tree import Supervisor

__all__ = ["Child", "ChildRecord", "ChildState", "RestartPolicy", "Supervisor", "describe_exit"]
