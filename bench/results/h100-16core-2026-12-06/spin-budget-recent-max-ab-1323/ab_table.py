import re,sys,glob,statistics as st,os
d=sys.argv[1]; rows={}
for f in sorted(glob.glob(d+'/w*-r*-m*.txt')):
    m=re.search(r'w(\d+)-r(\d+)-m(\d+)\.txt',f); w,r,mode=m.groups()
    for line in open(f):
        mm=re.match(r'^\(c\) ringcast \+ gather\s+(single|all)\s+(sync|async)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)',line)
        if mm:
            rep,mo=mm.group(1),mm.group(2)
            rows.setdefault((w,rep,mo,mode),[]).append((int(r),float(mm.group(5)),float(mm.group(9)),float(mm.group(10)),float(mm.group(8))))
for k in sorted(rows):
    v=sorted(rows[k]); o=[x[1] for x in v]
    print(f"W={k[0]:>2} {k[1]:6} {k[2]:5} m{k[3]}: ovh p50 per round {' '.join(f'{x:6.1f}' for x in o)}  median {st.median(o):6.1f}  idle w/e max {max(x[2] for x in v):.2f}/{max(x[3] for x in v):.2f}  worker CPU% {st.median([x[4] for x in v]):.1f}")
