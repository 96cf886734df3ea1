"""The flags ``serve`` and ``tune`` share, defined once: the callable and how it is described,
and the settings that decide its speed (read back as one :class:`~pytriton_like.tune.settings.Settings`).
"""

import argparse
from typing import TYPE_CHECKING, List, Optional

if TYPE_CHECKING:  # imported when the flags are read: building the parser (--help) stays light
    from ..tune.settings import Settings

__all__ = ["add_model_arguments", "add_settings_arguments", "settings_from_arguments", "model_flags"]


def _count(text: str) -> int:
    """An argparse type: an integer of 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _positive(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _sizes(text: str) -> List[int]:
    """An argparse type: comma-separated batch sizes of 1 or more, e.g. ``16,32``."""
    return [_positive(part) for part in text.split(",") if part.strip()]


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """``MODULE:CALLABLE``, ``--model-name``, ``--input``, ``--output``, ``--strict``."""
    parser.add_argument("target", metavar="MODULE:CALLABLE", help="e.g. my_models:add_sub")
    parser.add_argument("--model-name", help="the name clients call it by (default: the function's name; an object's class name)")
    parser.add_argument(
        "--input",
        dest="inputs",
        action="append",
        default=[],
        metavar="NAME:DTYPE:SHAPE",
        help="an input, e.g. a:float32:-1 or image:uint8:224,224,3 (repeat for each input)",
    )
    parser.add_argument(
        "--output",
        dest="outputs",
        action="append",
        default=[],
        metavar="NAME:DTYPE:SHAPE",
        help="an output, as --input (repeat for each output)",
    )
    parser.add_argument("--strict", action="store_true", help="check the callable's outputs against the declared ones")


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """The settings that decide the callable's speed (each None unless given)."""
    parser.add_argument(
        "--max-batch-size", type=_count, default=None, help="largest batch (default: ModelConfig's, 4; 0: no batching)"
    )
    parser.add_argument(
        "--max-queue-delay-microseconds",
        type=_count,
        default=None,
        metavar="US",
        help="how long the dynamic batcher holds a request for others to join its batch (default 0)",
    )
    parser.add_argument(
        "--preferred-batch-size",
        type=_sizes,
        default=None,
        metavar="N[,N...]",
        help="batch sizes the dynamic batcher sends as soon as it can form them (default: none)",
    )
    parser.add_argument(
        "--instances",
        type=_positive,
        default=None,
        metavar="N",
        help="N model instances as threads in this process (default 1; not with --workers)",
    )
    parser.add_argument(
        "--workers",
        type=_positive,
        default=None,
        metavar="N",
        help="run the callable in N worker processes, one model instance each (default 1: in this process)",
    )


def settings_from_arguments(args: argparse.Namespace, base: Optional["Settings"] = None) -> "Settings":
    """The settings the flags give; a flag not given takes ``base``'s value (a tune report's), else
    the default (``ModelConfig``'s batch size, no delay, one instance, one process).

    Raises:
        PyTritonBadParameterError: settings that do not go together (instances and workers, a
            preferred size above the largest batch, a delay without batching).
    """
    from ..model_config import ModelConfig  # noqa: PLC0415
    from ..tune.settings import Settings  # noqa: PLC0415

    if base is None:
        base = Settings(max_batch_size=ModelConfig().max_batch_size)
    size = base.max_batch_size if args.max_batch_size is None else args.max_batch_size
    delay = args.max_queue_delay_microseconds
    preferred = args.preferred_batch_size
    if size == 0 and args.max_batch_size is not None:  # no batching asked for: the base's batcher goes too
        delay = 0 if delay is None else delay
        preferred = [] if preferred is None else preferred
    return Settings(
        max_batch_size=size,
        max_queue_delay_microseconds=base.max_queue_delay_microseconds if delay is None else delay,
        preferred_batch_sizes=tuple(base.preferred_batch_sizes if preferred is None else preferred),
        instances=base.instances if args.instances is None else args.instances,
        workers=base.workers if args.workers is None else args.workers,
    )


def model_flags(args: argparse.Namespace) -> List[str]:
    """The model's flags as given (inputs, outputs, --strict), to hand to ``serve``."""
    flags: List[str] = []
    for text in args.inputs:
        flags += ["--input", text]
    for text in args.outputs:
        flags += ["--output", text]
    if args.strict:
        flags.append("--strict")
    return flags
