import json,sys,glob,os,statistics as st
# per batch: sync single/all (c)/(a) ovh ratio of medians; per-run c and a; plus p50 step, last_worker
for d in sorted(glob.glob(sys.argv[1]+'/*/showdown.json'), key=lambda p:(p.split('/')[-2].rsplit('-',1)[1],p)):
    j=json.load(open(d)); name=d.split('/')[-2]
    rows={(r['kind'],r['replies'],r['mode']):r for r in j['rows']}
    out=[]
    for mode in ('sync','async'):
      for rep in ('single','all'):
        a=rows.get(('a',rep,mode)); c=rows.get(('c',rep,mode))
        if not a or not c: continue
        out.append(f"{mode[:2]}-{rep[:3]} {c['overhead_p50_us']/a['overhead_p50_us']:.2f} (c {' '.join('%.0f'%x for x in c['overhead_p50_us_runs'])} | a {' '.join('%.0f'%x for x in a['overhead_p50_us_runs'])}) step {c['p50_us']:.0f}/{a['p50_us']:.0f} lw {c['breakdown_p50_us']['last_worker_has_it']:.1f}/{a['breakdown_p50_us']['last_worker_has_it']:.1f} rc {c['breakdown_p50_us']['reply_to_collected']:.1f}/{a['breakdown_p50_us']['reply_to_collected']:.1f}")
    print(name); [print('   ',o) for o in out]
