"""The one check that a model name from outside stays inside the model repository."""

from ..exceptions import PyTritonValidationError

__all__ = ["check_model_name"]

# A file name may be longer on few file systems; Triton makes a folder of the name.
_MAX_NAME_BYTES = 255


def check_model_name(name, what: str = "model") -> str:
    """Return ``name`` if it can only name a folder directly inside a model repository.

    Refused: anything but a non-empty str, ``.`` and ``..``, a path separator, NUL or another
    control character, more than 255 bytes. Nothing is read or written for a refused name.

    Raises:
        PyTritonValidationError: saying what is wrong with the name.
    """
    if not isinstance(name, str) or not name:
        raise PyTritonValidationError(f"a {what} name must be a non-empty str, got {name!r}")
    if name in (".", "..") or "/" in name or "\\" in name:
        raise PyTritonValidationError(f"{what} name {name!r} would leave the model repository: no '/', '\\', '.' or '..'")
    if any(ord(char) < 32 or ord(char) == 127 for char in name):
        raise PyTritonValidationError(f"{what} name {name!r} holds a control character (NUL, newline...)")
    if len(name.encode("utf-8", "surrogatepass")) > _MAX_NAME_BYTES:
        raise PyTritonValidationError(f"{what} name {name[:20]!r}... is longer than {_MAX_NAME_BYTES} bytes")
    return name
