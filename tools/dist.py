"""`make dist`: the sdist and the wheels a package index would accept, each checked, in dist/.

1. ``python -m build``: the sdist, and from it the wheel for this machine (x86_64);
2. from the same sdist, the wheel of the other architecture, cross-compiled (on x86_64:
   ``CC=aarch64-linux-gnu-gcc``, the C backend for aarch64, NVIDIA's aarch64 wheel for the
   server tree);
3. ``auditwheel show`` on each wheel: the platform tag it finds the files consistent with must be
   the one the wheel carries;
4. ``twine check --strict``: the metadata and the long description render on an index page.

Prints each file with its size and tag; exits 1 if a check fails. The C flags include -Werror
here (PYTRITON_LIKE_WERROR=1): this is the project's own build.

    python tools/dist.py [--outdir dist] [--arch x86_64 --arch aarch64]
"""

import argparse
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
# Debian's cross compilers, for the architectures other than this machine's (the Makefile
# installs gcc-aarch64-linux-gnu; it builds on x86_64).
CROSS_COMPILERS = {"x86_64": "x86_64-linux-gnu-gcc", "aarch64": "aarch64-linux-gnu-gcc"}
SCRIPTS = pathlib.Path(sys.executable).parent  # auditwheel's and twine's commands, beside this Python


def run(command, **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(str(part) for part in command), flush=True)
    return subprocess.run([str(part) for part in command], check=True, **kwargs)


def build_sdist_and_native_wheel(outdir: pathlib.Path, env: dict) -> None:
    """The sdist, then the wheel for this machine built from it (so the sdist is proven complete)."""
    run([sys.executable, "-m", "build", "--outdir", outdir, ROOT], env=env)


def build_wheel_from_sdist(sdist: pathlib.Path, arch: str, outdir: pathlib.Path, env: dict) -> None:
    with tempfile.TemporaryDirectory(prefix="pytriton_like-dist-") as scratch:
        with tarfile.open(sdist) as archive:
            safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python 3.12+ asks
            archive.extractall(scratch, **safe)
        (source,) = pathlib.Path(scratch).iterdir()
        run([sys.executable, "-m", "build", "--wheel", "--outdir", outdir, source], env={**env, "CC": CROSS_COMPILERS[arch]})


def wheel_platform(wheel: pathlib.Path) -> str:
    return wheel.name[: -len(".whl")].rsplit("-", 1)[1]


def audit(wheel: pathlib.Path) -> str:
    """``auditwheel show``'s verdict on ``wheel``: the platform tag its files allow (raises if none is found)."""
    completed = run([SCRIPTS / "auditwheel", "show", "--json", wheel], capture_output=True, text=True)
    return json.loads(completed.stdout)["overall_tag"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outdir", type=pathlib.Path, default=ROOT / "dist")
    parser.add_argument("--arch", action="append", choices=sorted(CROSS_COMPILERS), help="wheels to build (default: all)")
    args = parser.parse_args(argv)
    arches = args.arch or sorted(CROSS_COMPILERS)
    shutil.rmtree(args.outdir, ignore_errors=True)
    env = {**os.environ, "PYTRITON_LIKE_WERROR": "1"}
    build_sdist_and_native_wheel(args.outdir, env)
    (sdist,) = args.outdir.glob("pytriton_like-*.tar.gz")
    native = platform.machine()
    for arch in arches:
        if arch != native:
            build_wheel_from_sdist(sdist, arch, args.outdir, env)
    failures = 0
    for wheel in sorted(args.outdir.glob("*.whl")):
        if native not in arches and wheel.name.endswith(f"_{native}.whl"):
            wheel.unlink()  # built with the sdist, not asked for
            continue
        found = audit(wheel)
        agrees = found == wheel_platform(wheel)
        failures += not agrees
        print(f"{wheel.name}: {wheel.stat().st_size / 2**20:.1f} MiB; auditwheel show: consistent with {found}"
              f" ({'agrees' if agrees else 'DISAGREES with the tag'})")
    print(f"{sdist.name}: {sdist.stat().st_size / 2**10:.0f} KiB")
    checked = subprocess.run([SCRIPTS / "twine", "check", "--strict", *sorted(args.outdir.iterdir())], text=True,
                             capture_output=True)
    print(re.sub(r"\x1b\[[0-9;]*m", "", checked.stdout + checked.stderr).strip())
    failures += checked.returncode != 0
    print("dist: all checks passed" if not failures else f"dist: {failures} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
