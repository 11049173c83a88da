"""Run a snippet of Python in a fresh interpreter and measure its wall time and peak memory.

A memory bound can only be asserted in a process of its own (pytest's own peak would hide it),
so ``run_measured(code)`` runs ``code`` in a subprocess with this project's interpreter. The
snippet sees a dict ``result`` to put JSON-able values in; an exception it raises is caught and
reported as ``result["raised"]`` (the class name) and ``result["message"]``.

The peak is the kernel's VmHWM of the subprocess, not ``getrusage``'s ``ru_maxrss``: the latter
carries over the peak of the process it was forked from (subprocess forks with vfork, so that
is pytest's own peak), which hid the subprocess's in these tests.
"""

from __future__ import annotations

import json
import subprocess
import sys

PEAK_MIB = """
def peak_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
"""

WRAPPER = PEAK_MIB + """
import json, sys, time
started = time.monotonic()
result = {}
try:
    exec(compile(sys.argv[1], "<measured>", "exec"), {"result": result})
except BaseException as exc:
    result["raised"] = type(exc).__name__
    result["message"] = str(exc)[:500]
result["seconds"] = time.monotonic() - started
result["peak_mib"] = peak_mib()
print("MEASURED " + json.dumps(result))
"""


def run_measured(code: str, timeout: float = 90) -> dict:
    """``result`` of ``code`` plus ``seconds`` (its run, start-up excluded) and ``peak_mib``
    (the subprocess's peak resident memory). Raises subprocess.TimeoutExpired after
    ``timeout`` seconds, AssertionError when the subprocess died without a result."""
    out = subprocess.run([sys.executable, "-c", WRAPPER, code], capture_output=True, text=True,
                         timeout=timeout)
    for line in out.stdout.splitlines():
        if line.startswith("MEASURED "):
            return json.loads(line.removeprefix("MEASURED "))
    raise AssertionError(f"no result (exit {out.returncode}): {out.stderr[-2000:]}")
