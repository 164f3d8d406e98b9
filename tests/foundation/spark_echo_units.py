"""A unit function for the Spark engine test, shipped to executors with addPyFile."""

import os


def echo_unit(unit, options):
    return {"status": "ok", "factor": options["factor"] * unit.size, "pid": os.getpid()}
