"""The showdown's --trace: how much of a step is pickling, measured inside the step itself.

Every variant pickles with the same CPython `pickle` (the request, the replies), but inside its own calls:
ringcast's enqueue/dequeue/reply/collect, the baseline's enqueue/dequeue. To split a step's parts into
pickling and transport without changing which calls a variant makes, `install()` puts a stand-in for the
`pickle` module into those modules: its `dumps`/`loads` add the time they took to this process's
counters, every other name is the real module's. Forked workers inherit it.

A measured call costs two more clock reads (~0.1 us each on the machines measured), paid by every
variant alike; a traced run's figures are its own, not to be mixed with an untraced run's.
"""

import pickle
import sys
import time
import types

_now = time.monotonic_ns  # CLOCK_MONOTONIC: comparable with the timestamps other processes take
_dumps, _loads = pickle.dumps, pickle.loads

# This process's totals (ns). A reader takes the difference around the calls it wants to attribute.
spent = {"dumps": 0, "loads": 0}
# When a list: every timed loads also appends (start ns, duration ns) to it — for a caller that must
# tell unpickling done before a moment from unpickling done after it.
loads_log = None


def _timed_dumps(*args, **kwargs):
    t0 = _now()
    out = _dumps(*args, **kwargs)
    spent["dumps"] += _now() - t0
    return out


def _timed_loads(*args, **kwargs):
    t0 = _now()
    out = _loads(*args, **kwargs)
    took = _now() - t0
    spent["loads"] += took
    if loads_log is not None:
        loads_log.append((t0, took))
    return out


def timed_pickle_module():
    """A module object with pickle's names, dumps and loads timed."""
    mod = types.ModuleType("pickle")
    mod.__dict__.update(pickle.__dict__)
    mod.dumps, mod.loads = _timed_dumps, _timed_loads
    return mod


def install(module_names):
    """Replaces the `pickle` global of each named (imported) module with the timed stand-in; ringcast's
    compiled module, which pickles inside its one-call paths, gets the timed dumps/loads too."""
    timed = timed_pickle_module()
    for name in module_names:
        module = sys.modules[name]
        if getattr(module, "pickle", None) is not pickle:
            raise RuntimeError(f"--trace: {name} does not use the pickle module by that name")
        module.pickle = timed
    core = sys.modules.get("ringcast._core")
    if hasattr(core, "_set_pickle_functions"):  # a module built before the one-call paths pickles in Python only
        core._set_pickle_functions(_timed_dumps, _timed_loads)
