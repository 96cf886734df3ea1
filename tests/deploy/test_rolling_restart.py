"""Three replicas behind HAProxy, each restarted with SIGTERM under load and one SIGKILLed: nothing is lost.

Marked ``deploy`` (not in `make test`): about a minute of load; run it with `make test-deploy`,
which installs HAProxy from Debian's packages. The scenario is in tests/deploy/rolling.py; the
results are printed and written to tests/deploy/results/latest.json.
"""

import os
import shutil

import pytest

from tests.functional.conftest import leftovers, server_processes, shm_segments

from .rolling import RETRYABLE, report, run

pytestmark = pytest.mark.deploy


def test_rolling_restart_behind_haproxy_loses_no_request():
    if not shutil.which("haproxy") and not os.path.exists("/usr/sbin/haproxy"):
        pytest.fail("haproxy is not installed: run `make test-deploy`, which installs it")
    processes, segments = server_processes(), shm_segments()
    result = run()
    print("\n" + report(result))
    assert result["requests"] > 1000
    for row in result["phases"]:
        if "SIGKILL" in row["phase"]:
            # Killed: requests it held may fail, but only with an error worth retrying.
            assert set(row["failures"]) <= RETRYABLE, row
        else:
            assert row["failures"] == {}, row  # wrong answers included
    assert [event["exit_code"] for event in result["events"] if "exit_code" in event] == [0, 0, 0]
    assert leftovers(processes, segments, result["ports"]) == {}
    shutil.rmtree(result["logs"], ignore_errors=True)
