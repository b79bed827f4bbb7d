import json,glob,os,sys
for d in sorted(glob.glob(sys.argv[1]+'/*/')):
    try: j=json.load(open(d+'showdown.json'))
    except Exception as e: print(d,'no json'); continue
    rows={(r['kind'],r['replies'],r['mode']):r for r in j['rows']}
    out=[]
    for mode in ('sync','async'):
      for rep in ('single','all'):
        c=rows[('c',rep,mode)]; a=rows[('a',rep,mode)]
        out.append(f"{mode:5} {rep:6} c {c['overhead_p50_us']:6.1f} a {a['overhead_p50_us']:7.1f} r {c['overhead_p50_us']/a['overhead_p50_us']:.2f} lost c {c['cpu_lost_share']*100:3.0f}% a {a['cpu_lost_share']*100:3.0f}% kept c {c['cpu_kept_overhead_p50_us']:.1f} a {a['cpu_kept_overhead_p50_us']:.1f} wsl {c['worker_sleeps_per_step']:.2f} esl {c['executor_sleeps_per_step']:.2f} e2e c {c['p50_us']:.0f} a {a['p50_us']:.0f} idle c {max(c['worker_idle_cpu_pct']) if isinstance(c['worker_idle_cpu_pct'],list) else c['worker_idle_cpu_pct']:.2f}")
    print(os.path.basename(d[:-1])); print('  '+'\n  '.join(out))
