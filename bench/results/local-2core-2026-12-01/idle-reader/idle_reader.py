# Scratch: CPU of an idle Python reader. PYTHONPATH=build/python python3 idle_reader.py <dequeue timeout s>
import os, sys, time, ringcast, threading
mq = ringcast.MessageQueue(1, 1)
h = mq.export_handle()
pid = os.fork()
if pid == 0:
    r = ringcast.MessageQueue.create_from_handle(h, 0)
    for _ in range(50): r.dequeue()   # warm: short waits
    try: r.dequeue(timeout=float(sys.argv[1]))
    except TimeoutError: pass
    os._exit(0)
mq.wait_until_ready()
for i in range(50): mq.enqueue(i); time.sleep(0.0005)
def cpu(p):
    t=0
    for tid in os.listdir(f"/proc/{p}/task"):
        t+=int(open(f"/proc/{p}/task/{tid}/schedstat").read().split()[0])
    return t/1e9
time.sleep(0.2)
c0=cpu(pid); t0=time.time(); time.sleep(3); c1=cpu(pid); t1=time.time()
print(f"idle reader CPU {100*(c1-c0)/(t1-t0):.3f} %")
os.kill(pid, 9); os.waitpid(pid, 0)
