# One process: the request pickled by enqueue (its reader, in the same process, reading it back), by
# pickle.dumps alone, followed by pickle.loads of its output, or kept; and enqueue without reading back.
# Run from the repository root: PYTHONPATH=build/python python3 THIS
import sys, time, pickle, statistics
sys.path.insert(0, "bench/showdown")
import pickle_clock, ringcast
from showdown import scheduler_output
pickle_clock.install(("ringcast._queue", "ringcast._gather", "spin_yield_mq"))
spent = pickle_clock.spent
mq = ringcast.MessageQueue(1, 1)
rd = ringcast.MessageQueue.create_from_handle(mq.export_handle(), 0)
core_w = mq._writer if hasattr(mq, "_writer") else None
def ring_one(req):
    d0 = spent["dumps"]; mq.enqueue(req); d = spent["dumps"] - d0; rd.dequeue(); return d
def ring_nodeq(req, n=[0]):
    d0 = spent["dumps"]; mq.enqueue(req); d = spent["dumps"] - d0
    n[0] += 1
    if n[0] % 50 == 0:
        for _ in range(50): rd.dequeue()
    return d
def plain_one(req):
    d0 = spent["dumps"]; pickle_clock._timed_dumps(req, protocol=5); return spent["dumps"] - d0
def plain_loads(req):
    d0 = spent["dumps"]; b = pickle_clock._timed_dumps(req, protocol=5); d = spent["dumps"] - d0; pickle.loads(b); return d
def plain_keep(req, keep=[]):
    d0 = spent["dumps"]; b = pickle_clock._timed_dumps(req, protocol=5); d = spent["dumps"] - d0; keep.append(b); del keep[:-1]; return d
for rnd in range(2):
    for name, f in (("plain", plain_one), ("plain_loads", plain_loads), ("plain_keep", plain_keep), ("ring", ring_one), ("ring_nodeq", ring_nodeq)):
        xs = []
        for step in range(1, 3001):
            req = scheduler_output(step)
            xs.append(f(req))
        xs = xs[300:]
        print(rnd, "%-12s" % name, "p50 %.2f us  p10 %.2f" % (statistics.median(xs)/1e3, sorted(xs)[len(xs)//10]/1e3))
