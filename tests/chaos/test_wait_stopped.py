"""The SIGSTOP scenario's wait for its child's self-stop (``harness._wait_stopped``): a
SIGCONT sent before the child has stopped is lost and would leave it stopped for good."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.chaos.harness import InvariantViolation, _wait_stopped

# Prints "paused" and only then (after a delay, as a descheduled child would) stops itself.
_CHILD = (
    "import os, signal, sys, time\n"
    "print('paused', flush=True)\n"
    "time.sleep(float(sys.argv[1]))\n"
    "if sys.argv[2] == 'stop':\n"
    "    os.kill(os.getpid(), signal.SIGSTOP)\n"
    "    print('resumed', flush=True)\n"
)


def _child(delay_s: float, action: str) -> subprocess.Popen[str]:
    p = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(delay_s), action], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None
    assert p.stdout.readline() == "paused\n"
    return p


def test_sigcont_after_the_wait_reaches_a_child_that_stopped_late() -> None:
    p = _child(1.0, "stop")
    _wait_stopped(p, "late stop")
    p.send_signal(signal.SIGCONT)  # without the wait it would come during the delay
    out, _ = p.communicate(timeout=30)
    assert out == "resumed\n"
    assert p.returncode == 0


def test_a_child_that_exits_instead_of_stopping_fails_with_its_status() -> None:
    p = _child(0.0, "exit")
    with pytest.raises(InvariantViolation, match="exited 0 instead of stopping"):
        _wait_stopped(p, "no stop")
    assert p.returncode == 0


def test_a_child_that_never_stops_is_killed_after_the_timeout() -> None:
    p = _child(60.0, "stop")
    with pytest.raises(InvariantViolation, match=r"did not stop within 0\.5s"):
        _wait_stopped(p, "never", timeout_s=0.5)
    assert p.returncode == -signal.SIGKILL
