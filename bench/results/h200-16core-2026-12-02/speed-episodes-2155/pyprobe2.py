# (1) fresh processes with ASLR off (setarch -R) against on; (2) one long-lived process: the mode over time.
import os, subprocess, sys, time
CHILD = r'''
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[2])})
def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x
n = int(sys.argv[1]); blocks = int(sys.argv[3]); out = []
import ctypes
for b in range(blocks):
    v = []
    for _ in range(100):
        t0 = time.thread_time(); spin(n); v.append((time.thread_time() - t0) * 1e6)
    v.sort(); out.append(f"{v[50]:.0f}")
    if b % 5 == 4: time.sleep(0.05)
print(" ".join(out), "stack", hex(ctypes.addressof(ctypes.c_int.from_buffer(bytearray(4))) % 4096), "sp", hex(id(sys._getframe()) % 4096))
'''
n = 20762
ncpu = os.cpu_count()
for label, pre in (("aslr on ", []), ("aslr off", ["setarch", "x86_64", "-R"])):
    for k in range(int(sys.argv[1])):
        cpu = (2 + k % 4) % ncpu
        out = subprocess.run(pre + [sys.executable, "-c", CHILD, str(n), str(cpu), "2"], capture_output=True, text=True)
        print(label, k, cpu, out.stdout.strip() or out.stderr[-200:], flush=True)
out = subprocess.run([sys.executable, "-c", CHILD, str(n), "6", sys.argv[2]], capture_output=True, text=True)
print("long-lived, per 100 loops:", out.stdout.strip() or out.stderr[-300:])
