"""A pool stopped while a worker was sending its result lets the interpreter leave.

Measured before: with the read planner's rank pool, the signals test
``test_rank_workers_interrupted_before_the_parent_do_not_hang_it`` hung in 1 of 4 runs of
its module under load: "cann-diff: interrupted" was printed, then the process waited at
exit (``concurrent.futures``' exit hook joining the pool's manager thread), which was
blocked reading the rest of a result whose worker had been stopped in the middle of
writing it (py-spy: ``Connection._recv`` in ``wait_result_broken_or_wakeup``). Here a
worker writes half a message by hand, so the state is reached every time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from conftest import ROOT

SCRIPT = textwrap.dedent("""
    import pathlib, struct, sys, time
    from concurrent.futures import ProcessPoolExecutor
    from cann_diff import processes

    def half_a_result(flag):
        from multiprocessing import current_process
        result_queue = current_process()._args[1]  # what the pool's worker writes to
        # A header promising 1 MB, ten bytes of it, then nothing: a worker stopped mid-send.
        result_queue._writer._send(struct.pack("!i", 1_000_000) + b"x" * 10)
        pathlib.Path(flag).touch()
        time.sleep(600)

    if __name__ == "__main__":
        flag = pathlib.Path(sys.argv[1])
        pool = ProcessPoolExecutor(1, mp_context=processes.pool_context("cann_diff.read"))
        future = pool.submit(half_a_result, str(flag))
        while not flag.exists():
            time.sleep(0.01)
        manager = pool._executor_manager_thread
        time.sleep(0.2)  # the manager is reading the rest now
        processes.kill_pool(pool, 0.5)
        manager.join(5)
        print("manager alive" if manager.is_alive() else "manager gone", flush=True)
""")


def test_a_pool_killed_mid_result_does_not_hold_the_exit(tmp_path):
    script = tmp_path / "half.py"
    script.write_text(SCRIPT)
    try:
        done = subprocess.run([sys.executable, str(script), str(tmp_path / "sent")],
                              cwd=ROOT, capture_output=True, text=True, timeout=30,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    except subprocess.TimeoutExpired:
        raise AssertionError("the process did not leave: its exit waits for the pool") from None
    assert done.stdout.strip() == "manager gone", done.stderr
    assert done.returncode == 0, done.stderr
