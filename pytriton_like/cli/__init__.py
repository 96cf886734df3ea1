"""The ``pytriton_like`` command (also ``python -m pytriton_like``): ``check`` and ``serve``.

``pytriton_like check`` checks the environment and serves and calls a sample model, as
PyTriton's ``pytriton check`` does; ``pytriton_like serve module:callable`` serves one callable
for a quick trial. See docs/cli.md.
"""

import argparse
import logging
import sys
from typing import List, Optional

from .. import __version__

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The command line: a sub-command per action."""
    parser = argparse.ArgumentParser(
        prog="pytriton_like",
        description="Serve Python callables through NVIDIA Triton Inference Server (see docs/cli.md).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="log the library's INFO lines (-vv: DEBUG) to stderr"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser(
        "check",
        help="check the environment, then serve and call a sample model",
        description=(
            "Check what serving needs (Python, its libpython, the tritonserver stub for this Python,"
            " numpy, glibc, free /dev/shm, the default ports), then start a server with a sample model on"
            " free ports, call it over HTTP and gRPC and stop it. Exits 1 if a check failed."
        ),
    )
    check.add_argument(
        "--skip-serving", action="store_true", help="check the environment only, without starting a server"
    )
    check.set_defaults(run=_run_check)

    serve = commands.add_parser(
        "serve",
        help="serve one callable (module:callable) for a quick trial",
        description=(
            "Import MODULE (the current folder is on the path) and serve its CALLABLE as a model until"
            " CTRL+C. Inputs come from --input, or from the parameters of a @batch/@sample callable"
            " (float32, shape (-1,), unless annotated with numpy.typing.NDArray[dtype]); outputs come from"
            " --output, or from one call of the callable with a sample of ones."
        ),
    )
    serve.add_argument("target", metavar="MODULE:CALLABLE", help="e.g. my_models:add_sub")
    serve.add_argument("--model-name", help="the name clients call it by (default: the function's name; an object's class name)")
    serve.add_argument(
        "--input",
        dest="inputs",
        action="append",
        default=[],
        metavar="NAME:DTYPE:SHAPE",
        help="an input, e.g. a:float32:-1 or image:uint8:224,224,3 (repeat for each input)",
    )
    serve.add_argument(
        "--output",
        dest="outputs",
        action="append",
        default=[],
        metavar="NAME:DTYPE:SHAPE",
        help="an output, as --input (repeat for each output)",
    )
    serve.add_argument(
        "--max-batch-size", type=int, default=None, help="largest batch (default: ModelConfig's, 4; 0: no batching)"
    )
    serve.add_argument("--strict", action="store_true", help="check the callable's outputs against the declared ones")
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="run the callable in N worker processes, one model instance each (default 1: in this process)",
    )
    for endpoint in ("http", "grpc", "metrics"):
        serve.add_argument(f"--{endpoint}-port", type=int, default=None, help=f"the {endpoint} port")
    serve.set_defaults(run=_run_serve)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit code (what ``pytriton_like`` and ``python -m pytriton_like`` run).

    Args:
        argv: the arguments after the program's name (default: ``sys.argv[1:]``).

    Example:
        >>> main(["check", "--skip-serving"])                                # doctest: +SKIP
        0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.verbose:
        logging.basicConfig(
            level=logging.DEBUG if args.verbose > 1 else logging.INFO,
            format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        )
    return args.run(args)


def _run_check(args: argparse.Namespace) -> int:
    from .check import run_checks  # noqa: PLC0415 - each command imports what it needs

    return run_checks(serving=not args.skip_serving, out=sys.stdout)


def _run_serve(args: argparse.Namespace) -> int:
    from .serve import serve_target  # noqa: PLC0415 - each command imports what it needs

    return serve_target(args)
