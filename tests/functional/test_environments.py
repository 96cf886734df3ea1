"""The server starts and serves from interpreters other than this virtualenv's."""

import os
import pathlib
import subprocess
import sys
import sysconfig

import numpy as np
import tritonclient.http as httpclient

from .conftest import free_ports

REPO = pathlib.Path(__file__).resolve().parents[2]

SERVER = """
import sys
import numpy as np
from pytriton_like.model_config import Tensor
from pytriton_like.triton import Triton, TritonConfig

config = TritonConfig(http_port=int(sys.argv[1]), grpc_port=int(sys.argv[2]), metrics_port=int(sys.argv[3]))
with Triton(config=config) as triton:
    triton.bind(model_name="Square", infer_func=lambda requests: [{"y": r["x"] ** 2} for r in requests],
                inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))])
    triton.run()
    print("READY", flush=True)
    sys.stdin.readline()
"""


def test_base_interpreter_outside_the_virtualenv():
    # The interpreter the virtualenv was made from (pyenv's here), with our packages on
    # PYTHONPATH: the stub must still get this interpreter's libpython and these packages.
    base_python = pathlib.Path(sys.base_prefix) / "bin" / f"python{sysconfig.get_python_version()}"
    assert base_python.exists()
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "LD_LIBRARY_PATH")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])
    ports = free_ports(3)
    with subprocess.Popen(
        [str(base_python), "-c", SERVER, *map(str, ports)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True,
    ) as process:
        result = _square_through(process, ports[0])
    np.testing.assert_array_equal(result, [[1, 4, 9]])


def _square_through(process, http_port):
    try:
        assert process.stdout.readline().strip() == "READY"
        client = httpclient.InferenceServerClient(f"127.0.0.1:{http_port}")
        tensor = httpclient.InferInput("x", [1, 3], "FP32")
        tensor.set_data_from_numpy(np.array([[1, 2, 3]], np.float32))
        result = client.infer("Square", [tensor]).as_numpy("y")
        client.close()
        process.stdin.write("\n")
        process.stdin.flush()
        assert process.wait(60) == 0
        return result
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
