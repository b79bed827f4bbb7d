import os, sys, json
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "bench", "showdown"))
import showdown as sd
class SpinYield(sd.RingcastGather):
    name = "(f) gather spin_yield"
    options = {"wait": "spin_yield"}
sd.TRANSPORTS["f"] = SpinYield
exec(open(os.path.join(os.path.dirname(__file__), "one_variant_ts.py")).read().split("import showdown as sd", 1)[1])
