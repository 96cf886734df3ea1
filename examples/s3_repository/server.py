#!/usr/bin/env python3
"""Serve a model repository from S3 in poll mode: the hand-written Square of examples/model_repository.

With ``--s3-url s3://...`` (or PYTRITON_EXAMPLE_S3_URL) it serves that repository, with the
credentials of the AWS environment variables. Without one it starts a stand-in S3 server on
127.0.0.1 (moto's, ``pip install 'moto[server]'``), uploads examples/model_repository/repository
into bucket ``models`` and serves ``s3://127.0.0.1:<port>/models/repository`` from it. Ports come from
TritonConfig's defaults or PYTRITON_TRITON_CONFIG_HTTP_PORT and friends.

Square is a Python-backend model: run this example where numpy<2 is installed (Triton's stub is
built for numpy 1; with numpy 2 pytriton_like refuses to load it and says why).
"""

import argparse
import contextlib
import logging
import os
import pathlib

from pytriton_like.triton import Triton, TritonConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.s3_repository.server")
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # the stand-in S3 server logs every request

REPOSITORY = pathlib.Path(__file__).resolve().parents[1] / "model_repository" / "repository"


@contextlib.contextmanager
def stand_in_s3():
    """A moto S3 server on loopback holding examples/model_repository/repository; yields its URL."""
    import boto3  # noqa: PLC0415 - only the stand-in needs them
    from moto.server import ThreadedMotoServer  # noqa: PLC0415

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "example")  # any credentials do for the stand-in
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        s3 = boto3.client("s3", endpoint_url=f"http://{host}:{port}")
        s3.create_bucket(Bucket="models")
        for path in REPOSITORY.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                s3.upload_file(str(path), "models", f"repository/{path.relative_to(REPOSITORY)}")
        logger.info("stand-in S3 server on %s:%s with bucket 'models'", host, port)
        yield f"s3://{host}:{port}/models/repository"
    finally:
        server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--s3-url", default=os.environ.get("PYTRITON_EXAMPLE_S3_URL"))
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        url = args.s3_url or stack.enter_context(stand_in_s3())
        # poll mode: models added to, changed in or removed from the bucket are (re)loaded or unloaded
        config = TritonConfig(model_control_mode="poll", repository_poll_secs=5)
        with Triton(config=config, model_repository=url) as triton:
            logger.info("serving %s; stop with Ctrl-C", url)
            triton.serve()


if __name__ == "__main__":
    main()
