"""``Tensor``: the spec of one model input or output."""

import dataclasses
from typing import Any, Optional, Tuple

import numpy as np

__all__ = ["Tensor"]


@dataclasses.dataclass(frozen=True)
class Tensor:
    """Spec of a model input or output, without the batch axis.

    Args:
        shape: shape of one sample; ``-1`` marks a dimension of variable size.
        dtype: numpy dtype (``np.float32``, ``np.bytes_``, ``object`` for bytes/strings...).
        name: name of the tensor; when left out, inputs are named ``INPUT_1``... and outputs
            ``OUTPUT_1``... in the order given.
        optional: whether a request may leave this input out.

    Example:
        >>> Tensor(name="x", dtype=np.float32, shape=(-1,))
        Tensor(shape=(-1,), dtype=<class 'numpy.float32'>, name='x', optional=False)
    """

    shape: Tuple[int, ...]
    dtype: Any
    name: Optional[str] = None
    optional: bool = False

    def __post_init__(self):
        # Normalise np.dtype("float32") and "float32" to the scalar type np.float32, as PyTriton does.
        dtype = self.dtype
        if not (isinstance(dtype, type) and issubclass(dtype, np.generic)) and dtype is not object:
            dtype = np.dtype(dtype).type
        object.__setattr__(self, "dtype", dtype)
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
