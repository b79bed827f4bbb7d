# Does a pause re-draw the speed of the Python that follows? One process per CPU given; per pause kind:
# 400 iterations of ~1 ms of the showdown's work with the pause between them; per iteration its time.
import os, sys, time
def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x
def busy(us):
    end = time.perf_counter_ns() + us * 1000
    while time.perf_counter_ns() < end:
        pass
cpu = int(sys.argv[1]); n = 20762
os.sched_setaffinity(0, {cpu})
kinds = [("none", None), ("spin 1000us", lambda: busy(1000)), ("sleep 20us", lambda: time.sleep(20e-6)),
         ("sleep 100us", lambda: time.sleep(100e-6)), ("sleep 300us", lambda: time.sleep(300e-6)),
         ("sleep 1000us", lambda: time.sleep(1e-3)), ("sleep 5000us", lambda: time.sleep(5e-3))]
for rep in range(2):
    for name, pause in kinds:
        v = []
        for _ in range(400):
            if pause: pause()
            t0 = time.thread_time_ns(); spin(n); v.append((time.thread_time_ns() - t0) / 1000)
        s = sorted(v)
        slow = [x > 850 for x in v]
        changes = sum(a != b for a, b in zip(slow, slow[1:]))
        fast_med = sorted(x for x in v if x <= 850)[len([x for x in v if x <= 850]) // 2] if any(x <= 850 for x in v) else 0
        slow_med = sorted(x for x in v if x > 850)[len([x for x in v if x > 850]) // 2] if any(slow) else 0
        print(f"cpu {cpu} rep {rep} {name:13}: slow {sum(slow):3d}/400, mode changes {changes:3d}/399, "
              f"fast p50 {fast_med:5.0f} slow p50 {slow_med:5.0f}", flush=True)
