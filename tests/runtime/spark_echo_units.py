"""A unit function for the Spark engine test, shipped to executors with addPyFile."""

import os
import time


def echo_unit(unit, options):
    started = time.time()
    time.sleep(options.get("sleep", 0))
    return {"status": "ok", "factor": options["factor"] * unit.size, "pid": os.getpid(), "started": started,
            "ended": time.time()}


def maybe_failing_unit(unit, options):
    """The echo unit, except that the units named in ``options["fail"]`` raise."""
    if unit.id in options.get("fail", ()):
        raise RuntimeError(f"boom {unit.id}")
    return echo_unit(unit, options)
