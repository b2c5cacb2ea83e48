"""Benchmark the offline synth: wall time and peak memory per stack (target: well under 2 s per stack).

Usage: .venv/bin/python -m scripts.benchmark [--repeat N]

`cold` is a fresh `python -m synth <stack> --out <tmp>` process (imports included), as CI and a developer
run it; `warm` is the run + render alone inside an already-imported process (best of N), which is what
grows with the size of the program.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc

from synth import snapshot
from synth.runner import ROOT, run_stack, stacks


def cold(stack: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (MiB) of one fresh synth process."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        process = subprocess.Popen(
            [sys.executable, "-m", "synth", stack, "--out", out], cwd=ROOT, stdout=subprocess.DEVNULL
        )
        _, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"synth {stack} failed")
    return elapsed, usage.ru_maxrss / 1024


def warm(stack: str, repeat: int) -> tuple[float, float]:
    """Best wall seconds and peak traced allocation (MiB) of run + render in this process."""
    run_stack(stack)  # first run loads the provider modules the program touches
    best = float("inf")
    peak = 0.0
    for _ in range(repeat):
        tracemalloc.start()
        start = time.perf_counter()
        snapshot.render(run_stack(stack))
        best = min(best, time.perf_counter() - start)
        peak = max(peak, tracemalloc.get_traced_memory()[1] / 2**20)
        tracemalloc.stop()
    return best, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'stack':<8} {'cold s':>8} {'cold RSS MiB':>13} {'warm s':>8} {'warm peak MiB':>14} resources")
    for stack in stacks():
        cold_s, rss = cold(stack)
        warm_s, peak = warm(stack, args.repeat)
        count = len(run_stack(stack).resources)
        print(f"{stack:<8} {cold_s:>8.2f} {rss:>13.0f} {warm_s:>8.2f} {peak:>14.1f} {count:>9}")


if __name__ == "__main__":
    main()
