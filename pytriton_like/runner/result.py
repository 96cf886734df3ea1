"""``RunResult``: the whole answer to one runner call, the same over HTTP and gRPC."""

from typing import Any, Dict, List

import numpy as np

__all__ = ["RunResult"]


class RunResult:
    """The outputs of one ``run`` / ``async_run`` and the response they came in.

    Args:
        result: tritonclient's ``InferResult`` (tritonclient.http or tritonclient.grpc).

    Example:
        >>> result = runner.AddSub.run(a, b)               # doctest: +SKIP
        >>> result.as_numpy("add")
        array([[1.5, 2.5]], dtype=float32)
        >>> result.get_output("add")
        {'name': 'add', 'datatype': 'FP32', 'shape': [1, 2]}
    """

    def __init__(self, result: Any):
        self._result = result
        self._response = _response_dict(result.get_response())

    def as_numpy(self, name: str) -> np.ndarray:
        """The output ``name`` as an array (BYTES outputs: an object array of ``bytes``).

        Args:
            name: the output's name.

        Raises:
            KeyError: the response has no output ``name``; the message lists those it has.
        """
        self._check(name)
        return self._result.as_numpy(name)

    def get_output(self, name: str) -> Dict[str, Any]:
        """The metadata of output ``name``: ``{"name", "datatype", "shape"}``.

        Args:
            name: the output's name.

        Raises:
            KeyError: the response has no output ``name``.
        """
        self._check(name)
        return next(dict(output) for output in self._response["outputs"] if output["name"] == name)

    def get_response(self) -> Dict[str, Any]:
        """The response: ``{"model_name", "model_version", "id", "outputs": [<get_output(name)>...]}``."""
        return {**self._response, "outputs": [dict(output) for output in self._response["outputs"]]}

    @property
    def output_names(self) -> List[str]:
        """Names of the outputs, in the order of the response."""
        return [output["name"] for output in self._response["outputs"]]

    def __repr__(self) -> str:
        response = self._response
        return (
            f"RunResult(model_name={response['model_name']!r}, model_version={response['model_version']!r}, "
            f"outputs={self.output_names})"
        )

    def _check(self, name: str) -> None:
        if name not in self.output_names:
            raise KeyError(
                f"model {self._response['model_name']!r} answered no output {name!r}; "
                f"its outputs: {', '.join(map(repr, self.output_names)) or 'none'}"
            )


def _response_dict(response: Any) -> Dict[str, Any]:
    """The response's fields as plain values, from tritonclient.http's dict or tritonclient.grpc's protobuf."""
    if isinstance(response, dict):
        outputs = response.get("outputs", [])
        fields = {key: response.get(key, "") for key in ("model_name", "model_version", "id")}
        return dict(fields, outputs=[_output(o["name"], o["datatype"], o["shape"]) for o in outputs])
    return {
        "model_name": response.model_name,
        "model_version": response.model_version,
        "id": response.id,
        "outputs": [_output(o.name, o.datatype, o.shape) for o in response.outputs],
    }


def _output(name: str, datatype: str, shape) -> Dict[str, Any]:
    return {"name": name, "datatype": datatype, "shape": [int(dim) for dim in shape]}
