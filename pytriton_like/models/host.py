"""The bound models of one server, set up, loaded and torn down: what ``Triton``'s run and
``RemoteTriton`` share.

A model bound while the server runs is set up (its relay servers started, its repository entry
written) and loaded, or undone if that fails. A model served by worker processes gets an
:class:`~.availability.Availability`, so that it reports not ready while none of them serves.
"""

import logging
from typing import Dict, Optional

from ..server.management import ServerModels, no_control
from .availability import Availability
from .bindings import BoundModels
from .model import Hosting, Model

__all__ = ["ModelHost"]

logger = logging.getLogger(__name__)


class ModelHost:
    """Sets up, loads and tears down the bound models of one server.

    Args:
        models: the bound models.
        hosting: where their relay servers run.
        server_models: the server's model-management calls; None without its HTTP endpoint (then
            nothing is loaded after the start, and no model is unloaded while its worker
            processes are all lost).
    """

    def __init__(self, models: BoundModels, hosting: Hosting, server_models: Optional[ServerModels]):
        self.models = models
        self.hosting = hosting
        self.server_models = server_models
        self._availability: Dict[str, Availability] = {}

    def setup(self, model: Model) -> None:
        """Start a model version's relay servers (each binds its socket) and write its repository entry."""
        availability = None
        if model.processes and self.server_models is not None:
            availability = self._availability.get(model.name)
            if availability is None:
                name, server_models = model.name, self.server_models
                availability = self._availability[name] = Availability(
                    name, load=lambda: server_models.load(name), unload=lambda: server_models.unload(name),
                    grace_s=model.worker_options.restart_policy().grace_s,
                )
        model.setup(self.hosting, on_availability=availability.set if availability is not None else None)

    def load(self, model: Model) -> None:
        """Set up a model version and have the server (re)load its model; undone if that fails.

        Triton reloads the model's other versions too; their relay servers accept the new backend instances.
        """
        try:
            if self.server_models is None:
                raise no_control(f"bind model {model.name!r} after run()")
            self.setup(model)
            self.models.write_config(self.hosting.repository, model.name)
            self.server_models.load(model.name, f"load model {model.name!r} version {model.version}")
        except BaseException:
            self.forget(model)
            raise

    def forget(self, model: Model) -> None:
        """Undo the binding of a model version (that failed to load)."""
        self.models.remove(model)
        model.teardown(self.hosting.repository)
        self.models.write_config(self.hosting.repository, model.name)

    def stop_availability(self) -> None:
        """Load and unload no model from now on, whatever its worker processes do (the server stops)."""
        for availability in self._availability.values():
            availability.close()
        self._availability.clear()

    def teardown(self) -> None:
        """Stop every model's relay servers and remove their entries (the server unloaded them)."""
        self.stop_availability()
        for model in self.models:
            model.teardown(self.hosting.repository)
