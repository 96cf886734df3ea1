"""Put Triton's perf_analyzer in .venv/perf_analyzer (`make bench` runs this; see docs/performance.md).

The tritonclient 2.40.0 wheel is the last that ships the binary (tritonclient-2.40.0.data/data/bin/).
It needs libb64.so.0d (Debian's libb64-0d, installed by the Makefile) and libcudart.so.12, which
nvidia-pytriton's libraries contain under another name: a link to it goes in lib/.
"""

import pathlib
import stat
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

TARGET = pathlib.Path(__file__).resolve().parent.parent / ".venv" / "perf_analyzer"
MEMBER = "tritonclient-2.40.0.data/data/bin/perf_analyzer"


def main() -> int:
    libraries = pathlib.Path(sysconfig.get_paths()["purelib"]) / "nvidia_pytriton.libs"
    cudart = sorted(libraries.glob("libcudart-*.so.12*"))
    if not cudart:
        print(f"no libcudart-*.so.12* in {libraries}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "tritonclient==2.40.0",
             "--platform", "manylinux1_x86_64", "--only-binary=:all:", "-d", tmp],
            check=True,
        )
        (wheel,) = pathlib.Path(tmp).glob("tritonclient-2.40.0-*.whl")
        (TARGET / "lib").mkdir(parents=True, exist_ok=True)
        binary = TARGET / "perf_analyzer"
        binary.write_bytes(zipfile.ZipFile(wheel).read(MEMBER))
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    link = TARGET / "lib" / "libcudart.so.12"
    link.unlink(missing_ok=True)
    link.symlink_to(cudart[0])
    print(f"perf_analyzer in {binary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
