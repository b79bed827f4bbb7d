import os, sys, time, statistics
os.sched_setaffinity(0, {0})
def spin(n):
    x = 0
    for i in range(n):
        x += i
    return x
n=20000; best=1e9
for _ in range(20):
    t=time.thread_time(); spin(n); best=min(best,time.thread_time()-t)
iters=int(n*1e-3/best)
res=[]
for _ in range(400):
    t=time.thread_time(); spin(iters); res.append((time.thread_time()-t)*1e6)
    time.sleep(0.0002)
print(sys.argv[1], "median us %.0f p10 %.0f p90 %.0f" % (statistics.median(res), sorted(res)[40], sorted(res)[360]))
