"""The ``pytriton_like`` command (also ``python -m pytriton_like``): ``check``, ``serve`` and ``tune``.

``pytriton_like check`` checks the environment and serves and calls a sample model, as
PyTriton's ``pytriton check`` does; ``pytriton_like serve module:callable`` serves one callable
for a quick trial; ``pytriton_like tune module:callable`` finds the settings that serve it
fastest (docs/tuning.md). See docs/cli.md.
"""

import argparse
import logging
import sys
from typing import List, Optional

from .. import __version__
from ..tune.command import add_tune_arguments
from .flags import add_model_arguments, add_settings_arguments

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
    add_model_arguments(serve)
    add_settings_arguments(serve)
    serve.add_argument(
        "--settings",
        metavar="REPORT",
        help="serve with the settings a `pytriton_like tune` report recommends (its report.json, or the folder);"
        " settings flags given too take precedence",
    )
    for endpoint in ("http", "grpc", "metrics"):
        serve.add_argument(f"--{endpoint}-port", type=int, default=None, help=f"the {endpoint} port")
    serve.set_defaults(run=_run_serve)

    tune = commands.add_parser(
        "tune",
        help="find the batching, instances and worker processes that serve one callable fastest",
        description=(
            "Serve MODULE:CALLABLE (described as for serve) with one setting after another on free ports, drive"
            " each with concurrent clients, check every answer against the callable's own, and recommend the"
            " fastest setting within the latency budget (see docs/tuning.md). Needs the tune extra:"
            " pip install matplotlib tqdm."
        ),
    )
    add_model_arguments(tune)
    add_settings_arguments(tune)
    add_tune_arguments(tune)
    tune.set_defaults(run=_run_tune)
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


def _run_tune(args: argparse.Namespace) -> int:
    from ..tune.command import run_tune  # noqa: PLC0415 - each command imports what it needs

    return run_tune(args)
