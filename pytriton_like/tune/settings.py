"""The settings that decide a bound callable's speed, as one frozen value.

:class:`Settings` is what ``pytriton_like tune`` searches and recommends and what ``serve``
applies (its flags, or ``serve --settings report.json``): the largest batch, the dynamic
batcher's queue delay and preferred batch sizes, model instances as threads, worker processes.
It renders itself as ``bind(...)`` arguments and as ``serve`` flags.
"""

import dataclasses
import json
import pathlib
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..exceptions import PyTritonBadParameterError
from ..model_config import ModelConfig

__all__ = ["Settings", "read_recommended"]


@dataclasses.dataclass(frozen=True)
class Settings:
    """How Triton batches and runs one callable.

    Args:
        max_batch_size: the largest batch Triton sends the callable (0: no batching at all).
        max_queue_delay_microseconds: how long the dynamic batcher holds a request for others to join it.
        preferred_batch_sizes: batch sizes the batcher sends as soon as it can form them (empty: none).
        instances: model instances as threads in the serving process (only with ``workers`` 1).
        workers: worker processes, one model instance each.

    Raises:
        PyTritonBadParameterError: a negative or inconsistent value (both instances and workers
            above 1, a preferred size above the largest batch, a delay without batching).
    """

    max_batch_size: int
    max_queue_delay_microseconds: int = 0
    preferred_batch_sizes: Tuple[int, ...] = ()
    instances: int = 1
    workers: int = 1

    def __post_init__(self):
        object.__setattr__(self, "preferred_batch_sizes", tuple(sorted(set(self.preferred_batch_sizes))))
        if self.max_batch_size < 0 or self.max_queue_delay_microseconds < 0:
            raise PyTritonBadParameterError(
                f"max_batch_size and max_queue_delay_microseconds must be 0 or more, got {self.max_batch_size}"
                f" and {self.max_queue_delay_microseconds}"
            )
        if self.instances < 1 or self.workers < 1:
            raise PyTritonBadParameterError(
                f"instances and workers must be 1 or more, got {self.instances} and {self.workers}"
            )
        if self.instances > 1 and self.workers > 1:
            raise PyTritonBadParameterError(
                f"instances ({self.instances}) and workers ({self.workers}) do not combine: each worker process"
                " is one model instance; give more instances as threads or more workers, not both"
            )
        if self.max_batch_size == 0 and (self.max_queue_delay_microseconds or self.preferred_batch_sizes):
            raise PyTritonBadParameterError(
                "a queue delay or preferred batch sizes need batching: max_batch_size is 0"
            )
        wrong = [size for size in self.preferred_batch_sizes if not 1 <= size <= self.max_batch_size]
        if wrong:
            raise PyTritonBadParameterError(
                f"preferred batch sizes must be from 1 to max_batch_size ({self.max_batch_size}), got {wrong}"
            )

    @property
    def batching(self) -> bool:
        return self.max_batch_size > 0

    def model_config(self, base: Optional[ModelConfig] = None) -> ModelConfig:
        """A ``ModelConfig`` with these settings (the rest of ``base``'s, if given)."""
        if not self.batching:
            return dataclasses.replace(base or ModelConfig(), batching=False, max_batch_size=0)
        base = base or ModelConfig()
        batcher = dataclasses.replace(
            base.batcher,
            max_queue_delay_microseconds=self.max_queue_delay_microseconds,
            preferred_batch_size=list(self.preferred_batch_sizes) or None,
        )
        return dataclasses.replace(base, batching=True, max_batch_size=self.max_batch_size, batcher=batcher)

    def label(self) -> str:
        """A short description, e.g. ``max_batch_size 32, delay 2000 µs, 1 instance, 1 worker``."""
        if not self.batching:
            parts = ["no batching"]
        else:
            parts = [f"max_batch_size {self.max_batch_size}"]
            if self.max_queue_delay_microseconds:
                parts.append(f"delay {self.max_queue_delay_microseconds} µs")
            if self.preferred_batch_sizes:
                parts.append(f"preferred {','.join(map(str, self.preferred_batch_sizes))}")
        if self.workers > 1:
            parts.append(f"{self.workers} workers")
        else:
            parts.append(f"{self.instances} instance{'s' if self.instances > 1 else ''}")
        return ", ".join(parts)

    def serve_flags(self) -> List[str]:
        """The ``pytriton_like serve`` flags that apply these settings."""
        flags = ["--max-batch-size", str(self.max_batch_size)]
        if self.max_queue_delay_microseconds:
            flags += ["--max-queue-delay-microseconds", str(self.max_queue_delay_microseconds)]
        if self.preferred_batch_sizes:
            flags += ["--preferred-batch-size", ",".join(map(str, self.preferred_batch_sizes))]
        if self.instances > 1:
            flags += ["--instances", str(self.instances)]
        if self.workers > 1:
            flags += ["--workers", str(self.workers)]
        return flags

    def bind_arguments(self, infer_func: str = "infer_func") -> str:
        """The arguments of ``Triton.bind(...)`` that apply these settings, as Python source."""
        if not self.batching:
            config = "ModelConfig(batching=False)"
        else:
            batcher = []
            if self.max_queue_delay_microseconds:
                batcher.append(f"max_queue_delay_microseconds={self.max_queue_delay_microseconds}")
            if self.preferred_batch_sizes:
                batcher.append(f"preferred_batch_size={list(self.preferred_batch_sizes)}")
            extra = f", batcher=DynamicBatcher({', '.join(batcher)})" if batcher else ""
            config = f"ModelConfig(max_batch_size={self.max_batch_size}{extra})"
        func = f"[{infer_func}] * {self.instances}" if self.instances > 1 else infer_func
        workers = f", workers={self.workers}" if self.workers > 1 else ""
        return f"infer_func={func}, config={config}{workers}"

    def as_dict(self) -> Dict[str, Any]:
        return {
            "max_batch_size": self.max_batch_size,
            "max_queue_delay_microseconds": self.max_queue_delay_microseconds,
            "preferred_batch_sizes": list(self.preferred_batch_sizes),
            "instances": self.instances,
            "workers": self.workers,
        }

    @classmethod
    def from_dict(cls, fields: Mapping[str, Any]) -> "Settings":
        """Settings from :meth:`as_dict`'s keys (``max_batch_size`` required, the rest default)."""
        try:
            return cls(
                max_batch_size=int(fields["max_batch_size"]),
                max_queue_delay_microseconds=int(fields.get("max_queue_delay_microseconds") or 0),
                preferred_batch_sizes=tuple(int(size) for size in fields.get("preferred_batch_sizes") or ()),
                instances=int(fields.get("instances") or 1),
                workers=int(fields.get("workers") or 1),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise PyTritonBadParameterError(f"not settings: {dict(fields)!r} ({type(exc).__name__}: {exc})") from None


def read_recommended(path: str) -> Settings:
    """The ``recommended`` settings of a ``pytriton_like tune`` report (its report.json, or its folder).

    Raises:
        PyTritonBadParameterError: the file is missing or not such a report, or it recommends
            nothing (no setting met its latency budget).
    """
    file = pathlib.Path(path)
    if file.is_dir():
        file = file / "report.json"
    try:
        report = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PyTritonBadParameterError(f"cannot read {file}: {exc.strerror}") from None
    except ValueError as exc:
        raise PyTritonBadParameterError(f"{file} is not JSON: {exc}") from None
    if not isinstance(report, dict) or "recommended" not in report:
        raise PyTritonBadParameterError(f"{file} is not a report of pytriton_like tune: it has no 'recommended'")
    recommended = report["recommended"]
    if recommended is None:
        closest = report.get("closest") or {}
        detail = f"; the closest had p99 {closest['p99_ms']:.1f} ms" if "p99_ms" in closest else ""
        raise PyTritonBadParameterError(
            f"{file} recommends nothing: no setting met its latency budget{detail}; give the settings as flags"
        )
    return Settings.from_dict(recommended)
