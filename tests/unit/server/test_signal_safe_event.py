"""SignalSafeEvent: the event serve()'s SIGINT/SIGTERM handler sets, which must never hang the process."""

import subprocess
import sys
import textwrap
import threading
import time

from pytriton_like.server.signals import SignalSafeEvent


def test_it_waits_until_set_and_stays_set():
    event = SignalSafeEvent()
    assert not event.is_set()
    assert event.wait(0.01) is False
    assert event.wait(0) is False
    event.set()
    event.set()  # again: nothing more happens
    assert event.is_set()
    assert event.wait(0) is True
    assert event.wait() is True
    assert event.wait(0.01) is True


def test_every_waiting_thread_wakes_when_it_is_set():
    event = SignalSafeEvent()
    woke = []
    waiters = [threading.Thread(target=lambda: woke.append(event.wait(30))) for _ in range(8)]
    for waiter in waiters:
        waiter.start()
    time.sleep(0.05)
    assert woke == []
    event.set()
    for waiter in waiters:
        waiter.join(30)
    assert woke == [True] * 8


# The main thread waits on a new event each round while a one-shot timer's handler sets it, a few
# microseconds in: at some point the handler runs while wait() is beginning or ending. With a
# threading.Event in its place this hangs within a few hundred rounds (Python 3.11: set() waits for
# the lock that the interrupted wait() holds); that hang is what made serve() ignore a SIGTERM.
_RACE = textwrap.dedent(
    """
    import random, signal
    from pytriton_like.server.signals import SignalSafeEvent

    current = [None]
    signal.signal(signal.SIGALRM, lambda *_: current[0].set())
    for _ in range(20000):
        current[0] = event = SignalSafeEvent()
        signal.setitimer(signal.ITIMER_REAL, random.uniform(1e-6, 3e-5))
        while not event.wait(1e-5):
            pass
    print("done")
    """
)


def test_a_signal_handler_that_sets_it_while_the_main_thread_waits_never_hangs():
    finished = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True, timeout=120)
    assert (finished.returncode, finished.stdout) == (0, "done\n"), finished.stderr
