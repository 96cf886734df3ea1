"""Access tokens of the servers this OS user runs on this host, in owner-only files.

A running ``Triton`` writes its token to ``<runtime dir>/port-<port>.token`` for its HTTP and
gRPC ports, and removes the files (and the folder, once empty) when it stops. A client of this
package that connects to a port on this host without an ``access_token`` reads the file of that
port, so the restricted calls (load, unload, statistics...) work for the user who started the
server, in any of their processes, without passing the token around. Other users cannot read
it: the folder is 0700 and the files 0600. Nobody gains anything they could not have already: a
process of the same user can read the server's memory anyway.

The runtime dir is ``$XDG_RUNTIME_DIR/pytriton_like`` when that exists, else
``/dev/shm/pytriton_like_tokens-<uid>`` (a tmpfs, as the XDG runtime dir is: the token never
reaches a disk), else ``/tmp/pytriton_like_tokens-<uid>``; a folder that is a symlink, is not
ours or is open to others is not used (a warning says why). The name does not start with
``pytriton_like-``, the prefix of the relay's /dev/shm segments.

Imports nothing of this package: the serving and the client side both use it.
"""

import ipaddress
import logging
import os
import pathlib
import socket
import stat
from typing import Optional

__all__ = ["token_dir", "write_token", "read_token", "remove_token", "remove_stale_tokens", "is_local_host"]

logger = logging.getLogger(__name__)

_PRIVATE_DIR_MODE = 0o700
_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def token_dir(create: bool = False) -> Optional[pathlib.Path]:
    """The folder of the token files, checked to be private; None if it is missing or not safe."""
    folder = _folder()
    if create:
        try:
            folder.mkdir(mode=_PRIVATE_DIR_MODE)
        except FileExistsError:
            pass
        except OSError as exc:
            logger.warning("cannot create %s for the access-token file: %s", folder, exc)
            return None
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        logger.warning(
            "not using %s for access tokens: it must be a folder of yours that only you can open (mode 0700)", folder
        )
        return None
    return folder


def _folder() -> pathlib.Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return pathlib.Path(runtime) / "pytriton_like"
    ram = "/dev/shm"
    base = ram if os.path.isdir(ram) and os.access(ram, os.W_OK | os.X_OK) else "/tmp"
    return pathlib.Path(base) / f"pytriton_like_tokens-{os.getuid()}"


def _path(folder: pathlib.Path, port: int) -> pathlib.Path:
    return folder / f"port-{int(port)}.token"


def write_token(port: int, token: str, owner_pid: Optional[int] = None) -> Optional[pathlib.Path]:
    """Record ``token`` as the token of the server on ``port`` (served by ``owner_pid``, default this process)."""
    for attempt in range(2):
        folder = token_dir(create=True)
        if folder is None:
            return None
        _remove_stale(folder)
        path = _path(folder, port)
        partial = path.with_name(f".{path.name}.{os.getpid()}")
        try:
            fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as file:
                file.write(f"{owner_pid or os.getpid()} {token}\n")
            os.replace(partial, path)
        except OSError as exc:
            if isinstance(exc, FileNotFoundError) and attempt == 0:
                continue  # another server stopping removed the empty folder meanwhile: make it again
            logger.warning("cannot write the access-token file %s: %s", path, exc)
            return None
        return path
    return None  # pragma: no cover - the loop returns


def read_token(port: int) -> Optional[str]:
    """The token of the server on ``port`` of this host, if one of this user's processes serves it."""
    folder = token_dir()
    if folder is None:
        return None
    try:
        fd = os.open(_path(folder, port), os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, encoding="ascii") as file:
            if os.fstat(file.fileno()).st_uid != os.getuid():
                return None
            owner, token = file.read().split()
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return token if _alive(int(owner)) else None


def remove_token(port: int, owner_pid: Optional[int] = None) -> None:
    """Remove the token file of ``port`` if it is still the one ``owner_pid`` (default: this process) wrote."""
    folder = token_dir()
    if folder is None:
        return
    path = _path(folder, port)
    try:
        with open(path, encoding="ascii") as file:
            owner = int(file.read().split()[0])
        if owner == (owner_pid or os.getpid()):
            path.unlink()
    except (OSError, ValueError, IndexError):
        return
    _remove_if_empty(folder)


def remove_stale_tokens(exited_pid: int) -> None:
    """Remove the token files of ``exited_pid`` and of every other gone process, and the folder once empty.

    The reaper (server/reaper.py) calls it when the serving process ``exited_pid`` died without
    stopping (SIGKILL), so that nothing of it is left in /dev/shm. That process may not be
    reaped yet (a zombie still answers ``kill(pid, 0)``), hence its pid.
    """
    folder = token_dir()
    if folder is not None:
        _remove_stale(folder, exited_pid)
        _remove_if_empty(folder)


def _remove_if_empty(folder: pathlib.Path) -> None:
    try:
        folder.rmdir()  # the last server of this user leaves nothing behind
    except OSError:
        pass  # other servers' tokens are in it


def is_local_host(host: str) -> bool:
    """Whether ``host`` names this machine without a lookup: loopback, any-address or our host name."""
    host = host.strip("[]").lower()
    if host in _LOCAL_NAMES or host == socket.gethostname().lower():
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _remove_stale(folder: pathlib.Path, exited_pid: Optional[int] = None) -> None:
    """Remove the token files whose serving process is gone (killed before it could remove them)."""
    for path in folder.glob("port-*.token"):
        try:
            with open(path, encoding="ascii") as file:
                owner = int(file.read().split()[0])
            if owner == exited_pid or not _alive(owner):
                path.unlink()
        except (OSError, ValueError, IndexError):
            continue


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False  # another user's process: not a token of ours
    return True
