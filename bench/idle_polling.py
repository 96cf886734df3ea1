#!/usr/bin/env python3
"""``make bench-idle-polling``: what a KVM guest's idle policy does to serving, and to nested calls
against BLS: ``make bench-nested``'s measurements with the guest's halt polling off and on, in turns.

A guest with cpuidle's ``haltpoll`` driver halts an idle virtual CPU at once when
``/sys/module/haltpoll/parameters/guest_halt_poll_ns`` is 0; every hand-off to a thread on that CPU
then waits for the hypervisor to wake it. With polling on (the kernel's default, 200000 ns) an idle
CPU spins that long first. In one server (bench/serve_nested.py), each round measures every model
of ``make bench-nested`` with polling off, then on (the next round the other way round), and the
original setting comes back at the end, whatever happens. It needs root and a guest with that
driver; it changes nothing else. What the numbers show is in bench/README.md.

    make bench-idle-polling                # 16 floats, 2 rounds: about 10 minutes
    make bench-idle-polling ARGS="--rounds 1 --protocols http"
"""

import argparse
import json
import os
import pathlib
import sys
import tempfile
import time

import nested

HERE = pathlib.Path(__file__).resolve().parent
KNOB = pathlib.Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--poll-ns", type=int, default=200000, help="guest_halt_poll_ns while polling is on")
    parser.add_argument("--protocols", nargs="+", choices=("grpc", "http"), default=["grpc", "http"])
    parser.add_argument("--sizes", nargs="+", type=int, choices=sorted(nested.SIZES), default=[16])
    parser.add_argument("--interval-ms", type=int, default=2000, help="perf_analyzer's measurement window")
    parser.add_argument("--output", type=pathlib.Path, default=HERE / "results" / "idle_polling.json")
    args = parser.parse_args()
    if not KNOB.exists():
        raise SystemExit(f"{KNOB} is missing: this machine is not a guest with cpuidle's haltpoll driver")
    if os.geteuid() != 0:
        raise SystemExit(f"setting {KNOB} needs root")
    original = KNOB.read_text().strip()
    settings = (0, args.poll_ns)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-idle-polling-") as tmp:
        workdir = pathlib.Path(tmp)
        server = nested.start_server(workdir)
        with server:
            nested.check_answers(server, args.sizes)
            started = time.time()
            try:
                for round_index in range(args.rounds):
                    for setting in settings if round_index % 2 == 0 else reversed(settings):
                        KNOB.write_text(str(setting))
                        print(f"round {round_index + 1}: guest_halt_poll_ns {setting}", flush=True)
                        for found in nested.measure_all(server, args, range(round_index, round_index + 1)):
                            results.append({**found, "poll_ns": setting})
            finally:
                KNOB.write_text(original)
        report = server.stop_report or {}
    text = "\n\n".join(f"guest_halt_poll_ns {setting}:\n\n"
                       + nested.table([r for r in results if r["poll_ns"] == setting], args) + "\n\n"
                       + nested.cpu_table([r for r in results if r["poll_ns"] == setting], args)
                       for setting in settings)
    print(text)
    args.output.write_text(json.dumps({"when": started, "python": sys.version.split()[0], "original_poll_ns": original,
                                       "results": results, "table": text}, indent=1) + "\n")
    print(f"written {args.output}; guest_halt_poll_ns is {KNOB.read_text().strip()} again")
    if report.get("ports_in_use"):
        raise SystemExit(f"ports still in use after the stop: {report['ports_in_use']}")


if __name__ == "__main__":
    main()
