"""`make smoke-aarch64`: the aarch64 wheel's server and relay backend serving a model under qemu-user.

On an x86_64 machine: the aarch64 wheel (dist/, from `make dist`) is unpacked with pip for that
platform; its tritonserver runs under ``qemu-aarch64`` (Debian's qemu-user, with the cross
toolchain's aarch64 C library, and Debian's aarch64 zlib, fetched with apt-get into a folder of
its own: nothing is installed for arm64), named as a Triton install (``TritonConfig.triton_home``)
whose ``bin/tritonserver`` starts it; the wheel's aarch64 relay backend is the one the workspace
gives it. The Python side is this machine's: this interpreter, importing the aarch64 wheel's
pytriton_like. A model is bound, called over HTTP and gRPC, and the server stopped.

Not covered here: the reaper's waiting program (an aarch64 program this Python cannot start: the
reaper is then skipped, with its warning), and hand-written Python-backend models (the stub would
need an aarch64 libpython).

    python tools/smoke_aarch64.py [dist/pytriton_like-...-manylinux_2_35_aarch64.whl]
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SYSROOT = pathlib.Path("/usr/aarch64-linux-gnu")  # Debian's libc6-arm64-cross, libstdc++6-arm64-cross
APT_ARM64 = ["-o", "APT::Architecture=arm64", "-o", "APT::Architectures::=arm64"]

# The server's start script: qemu runs the aarch64 tritonserver; what pytriton_like preloads (its
# aarch64 token-hiding library) is for the emulated program, not for qemu itself.
WRAPPER = """#!/bin/sh
preload="$LD_PRELOAD"
unset LD_PRELOAD
exec {qemu} -L {sysroot} -E LD_PRELOAD="$preload" -E LD_LIBRARY_PATH="$LD_LIBRARY_PATH:{zlib}" {server} "$@"
"""

SMOKE = ROOT / "tools" / "smoke_model.py"  # a model served, called over HTTP and gRPC, stopped


def run(command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, check=False, **kwargs)


def aarch64_zlib(scratch: pathlib.Path) -> pathlib.Path:
    """Debian's aarch64 libz.so.1, downloaded by apt-get with lists and cache of its own (the
    machine's apt configuration is not touched) and unpacked under ``scratch``."""
    lists, cache, debs, root = (scratch / name for name in ("lists", "cache", "debs", "root"))
    for folder in (lists / "partial", cache / "archives" / "partial", debs, root):
        folder.mkdir(parents=True, exist_ok=True)
    private = ["-o", f"Dir::State::Lists={lists}", "-o", f"Dir::Cache={cache}", *APT_ARM64]
    for command in (["apt-get", *private, "update"], ["apt-get", *private, "download", "zlib1g:arm64"]):
        completed = run(command, cwd=debs)
        if completed.returncode != 0:
            raise SystemExit(f"{' '.join(command)}: {completed.stderr[-2000:]}")
    (deb,) = debs.glob("zlib1g_*_arm64.deb")
    run(["dpkg-deb", "-x", deb, root])
    (library,) = root.glob("lib/aarch64-linux-gnu/libz.so.1")
    return library.parent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("wheel", nargs="?", type=pathlib.Path, help="the aarch64 wheel (default: dist/'s)")
    args = parser.parse_args(argv)
    wheel = args.wheel or next(iter(sorted((ROOT / "dist").glob("pytriton_like-*_aarch64.whl"))), None)
    if wheel is None:
        raise SystemExit("no aarch64 wheel in dist/: run `make dist` first")
    qemu = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")
    if qemu is None or not (SYSROOT / "lib" / "libstdc++.so.6").exists():
        raise SystemExit("needs qemu-user and the aarch64 C and C++ runtimes: `make smoke-aarch64` installs them")
    with tempfile.TemporaryDirectory(prefix="pytriton_like-aarch64-") as folder:
        scratch = pathlib.Path(folder)
        site = scratch / "site"
        completed = run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--only-binary", ":all:",
                         "--platform", wheel.name[: -len(".whl")].rsplit("-", 1)[1], "--target", site, wheel])
        if completed.returncode != 0:
            raise SystemExit(f"pip install --target: {completed.stderr[-2000:]}")
        tree = site / "pytriton_like" / "tritonserver"
        home = scratch / "tritonserver"
        (home / "bin").mkdir(parents=True)
        start = home / "bin" / "tritonserver"
        start.write_text(WRAPPER.format(qemu=qemu, sysroot=SYSROOT, zlib=aarch64_zlib(scratch / "apt"),
                                        server=tree / "bin" / "tritonserver"))
        start.chmod(0o755)
        for name in ("lib", "caches"):
            (home / name).symlink_to(tree / name, target_is_directory=True)
        env = {**os.environ, "PYTHONPATH": str(site)}  # the aarch64 wheel's pytriton_like, this Python
        started = time.monotonic()
        completed = run([sys.executable, SMOKE, home], cwd=scratch, env=env, timeout=600)
        if completed.returncode != 0:
            print(f"FAIL after {time.monotonic() - started:.0f} s:\n{completed.stdout[-2000:]}{completed.stderr[-4000:]}")
            return 1
        result = json.loads(completed.stdout.strip().splitlines()[-1])
        if not result["package"].startswith(str(site)) or result["server"] is None or "qemu" not in result["server"][0]:
            print(f"FAIL: imported {result['package']} (not the aarch64 wheel's?), served by {result['server']}")
            return 1
        machine = run(["readelf", "-h", result["server"][1]]).stdout
        print(f"server process: {' running '.join(result['server'])}; its machine: "
              f"{' '.join(line.split(':', 1)[1].strip() for line in machine.splitlines() if 'Machine:' in line)}")
        print(f"{'ok' if result['ok'] else 'FAIL (wrong answers)'}: the aarch64 tritonserver and relay backend served"
              f" AddSub under qemu-user: ready in {result['ready_s']} s, answered over HTTP and gRPC"
              f" {result['answers']}, stopped ({result['serve_s']} s from start to stop)")
        return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
