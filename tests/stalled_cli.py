"""``python tests/stalled_cli.py ARGS…``: the real cann-diff command, stalled while it writes.

For the tests that signal or race a real process (test_exit_codes.py,
test_output_unit.py). Set by environment variables:

* ``STALL_READY``: a path touched once the first chart's temporary file is written (the
  report is then being written: a stage and a ``.*.png.*.tmp`` file exist);
* ``STALL_RELEASE``: the first chart then waits until this path exists (at most 60 s);
* ``STALL_REPLACE_S``: seconds to sleep after every ``os.replace``, widening the window in
  which two writers without a lock would mix their files.

Everything else is the shipped command (``cann_diff.cli.main``).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's cann_diff

from cann_diff.cli import main  # noqa: E402
from cann_diff.render import files  # noqa: E402

READY = os.environ.get("STALL_READY")
RELEASE = os.environ.get("STALL_RELEASE")
REPLACE_S = float(os.environ.get("STALL_REPLACE_S", "0"))

real_write_atomic = files.write_atomic
real_replace = os.replace
stalled = False


def stalled_write_atomic(path, write):
    """``write_atomic``; the first chart stops once its temporary file is written."""

    def write_then_stall(temp):
        global stalled
        write(temp)  # the temporary file now exists
        if READY and not stalled and Path(path).suffix == ".png":
            stalled = True
            Path(READY).touch()
            deadline = time.monotonic() + 60
            while not (RELEASE and Path(RELEASE).exists()) and time.monotonic() < deadline:
                time.sleep(0.05)

    return real_write_atomic(path, write_then_stall)


def slow_replace(source, target, *args, **kwargs):
    real_replace(source, target, *args, **kwargs)
    time.sleep(REPLACE_S)


files.write_atomic = stalled_write_atomic
os.replace = slow_replace
# Guarded: a worker process (the chart workers) runs this file again as "__mp_main__".
if __name__ == "__main__":
    # As in a terminal, even when the process that started the tests ignores SIGINT (a
    # background job does): Python then leaves SIGINT ignored in its children too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    main(sys.argv[1:], prog_name="cann-diff")
