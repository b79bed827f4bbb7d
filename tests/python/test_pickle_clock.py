"""The showdown's --trace clock (bench/showdown/pickle_clock.py): a module's own pickle calls are timed
and still pickle; everything else of the module is the real pickle's."""
import os
import pickle
import sys
import types

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "bench", "showdown"))
import pickle_clock  # noqa: E402


def test_a_modules_pickle_calls_are_timed_and_still_pickle():
    mod = types.ModuleType("traced_example")
    exec("import pickle\ndef roundtrip(o):\n    return pickle.loads(pickle.dumps(o, protocol=5))\n", mod.__dict__)
    sys.modules["traced_example"] = mod
    try:
        pickle_clock.install(["traced_example"])
        dumps0, loads0 = pickle_clock.spent["dumps"], pickle_clock.spent["loads"]
        assert mod.roundtrip({"a": list(range(1000))}) == {"a": list(range(1000))}
        assert pickle_clock.spent["dumps"] > dumps0 and pickle_clock.spent["loads"] > loads0
        assert mod.pickle.PickleBuffer is pickle.PickleBuffer and mod.pickle.HIGHEST_PROTOCOL == pickle.HIGHEST_PROTOCOL
        assert pickle.dumps is not mod.pickle.dumps  # the real module is left alone
    finally:
        del sys.modules["traced_example"]


def test_a_module_that_does_not_call_pickle_by_that_name_is_refused():
    mod = types.ModuleType("untraceable_example")
    sys.modules["untraceable_example"] = mod
    try:
        with pytest.raises(RuntimeError, match="does not use the pickle module"):
            pickle_clock.install(["untraceable_example"])
    finally:
        del sys.modules["untraceable_example"]
