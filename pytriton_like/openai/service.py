"""The OpenAI endpoint's process: ``python -m pytriton_like.openai.service``, started by ``OpenAIServer``.

It serves the endpoint (aiohttp, and gRPC over h2 towards tritonserver) on its own interpreter, so that
its work per piece does not wait for the GIL of the process whose threads run your callables
(docs/architecture.md measures why). It speaks with its parent through its standard streams
(:mod:`.stdio_protocol`): it reads its settings and the models, says when it listens, acknowledges
each change of the models, and tells each streamed request it gave up before its end; at the end
of its stdin (the parent closed it, or died — even by SIGKILL) it stops accepting requests, gives
up the streams still open after a short grace (their cancel keys told, as above), and exits.

SIGINT and SIGTERM are ignored: a Ctrl-C in a terminal reaches the whole process group, and the
parent stops this process in order (after the drain, before the models are unloaded).
"""

import asyncio
import logging
import signal
import sys
from typing import Dict

from aiohttp import web

from ..server.config import DEFAULT_OPENAI_MAX_UNREAD_BYTES
from .app import Routes
from .contract import OpenAIModel
from .stdio_protocol import SHUTDOWN_GRACE_S, Cancel, Failed, ModelsServed, Ready, decode_models, decode_settings, encode
from .upstream import Upstream

__all__ = ["main"]

_MAX_BODY_BYTES = 16 * 1024 * 1024


async def _serve(reader: asyncio.StreamReader, parent: "_Parent") -> int:
    settings = decode_settings(await reader.readline())
    first = decode_models(await reader.readline())
    models: Dict[str, OpenAIModel] = first.models if first is not None else {}
    upstream = Upstream(settings.grpc_target, settings.access_token,
                        on_abandoned=lambda model, key: parent.say(Cancel(key, model)))
    routes = Routes(upstream, lambda: models, settings.api_key,
                    settings.max_unread_bytes or DEFAULT_OPENAI_MAX_UNREAD_BYTES)
    # handler_cancellation: a client that goes away cancels its handler, hence its requests to Triton
    runner = web.AppRunner(
        routes.application(_MAX_BODY_BYTES), handler_cancellation=True, access_log=None, shutdown_timeout=SHUTDOWN_GRACE_S
    )
    try:
        await runner.setup()
        await web.TCPSite(runner, settings.host, settings.port, reuse_address=True).start()
    except OSError as exc:
        parent.say(Failed(str(exc)))
        await runner.cleanup()
        await upstream.close()
        return 1
    parent.say(Ready())
    try:
        while True:
            line = await reader.readline()
            if not line:
                break  # the parent closed our stdin, or died
            message = decode_models(line)
            if message is not None:
                models = message.models
                parent.say(ModelsServed(len(models)))
    finally:
        await runner.cleanup()
        await upstream.close()
    return 0


class _Parent:
    """Lines to the parent on stdout, written without blocking the event loop (a pipe transport)."""

    def __init__(self, transport: asyncio.WriteTransport):
        self._transport = transport

    def say(self, message) -> None:
        if not self._transport.is_closing():
            self._transport.write(encode(message))


async def _main() -> int:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, _ = await loop.connect_write_pipe(asyncio.Protocol, sys.stdout)
    try:
        return await _serve(reader, _Parent(transport))
    finally:
        for _ in range(100):  # what is still to be written (the parent may be gone: a while only)
            if not transport.get_write_buffer_size():
                break
            await asyncio.sleep(0.01)
        transport.close()


def main() -> int:
    """Serve until stdin ends; the exit code is 0, or 1 if it could not listen."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    logging.basicConfig(level=logging.WARNING, format="pytriton_like OpenAI endpoint: %(levelname)s %(message)s")
    return asyncio.run(_main())


if __name__ == "__main__":
    sys.exit(main())
