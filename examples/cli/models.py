"""A model module to serve from the command line: ``pytriton_like serve models:normalize``.

The parameters of the ``@batch`` callable name its inputs, their annotations give the dtypes;
the outputs are found by one call with a sample of ones (docs/cli.md).
"""

import numpy as np
import numpy.typing as npt

from pytriton_like.decorators import batch


@batch
def normalize(x: npt.NDArray[np.float32]):
    """Each row scaled to length 1, and the length it had."""
    norm = np.linalg.norm(x, axis=1, keepdims=True)
    return {"normalized": x / np.maximum(norm, 1e-12), "norm": norm}
