"""A unit function for the Spark engine test, shipped to executors with addPyFile."""

import os
import time


def echo_unit(unit, options):
    started = time.time()
    time.sleep(options.get("sleep", 0))
    return {"status": "ok", "factor": options["factor"] * unit.size, "pid": os.getpid(), "started": started,
            "ended": time.time()}
