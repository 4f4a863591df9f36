export LD_LIBRARY_PATH=/usr/local/cuda/lib64
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
echo "py7 = package of 050a354; py8 = $(cat .devbin/rev8.txt) + working tree (small operands kept); py8p/py8q: py8 planted" > $OUT/build.txt
for i in 1 2 3; do
  PKG=old PYTHONPATH=$PWD/.devbin/py7 python3 .devbin/micro5.py >> $OUT/micro5.txt 2>&1
  PKG=new PYTHONPATH=$PWD/.devbin/py8 python3 .devbin/micro5.py >> $OUT/micro5.txt 2>&1
done
PYTHONPATH=$PWD/.devbin/py8 python3 -m pytest python/tests/test_torch.py -q -p no:cacheprovider > $OUT/pytest.txt 2>&1; echo pytest rc $?; tail -1 $OUT/pytest.txt
rm -rf /tmp/py8p /tmp/py8q; cp -r .devbin/py8 /tmp/py8p; cp -r .devbin/py8 /tmp/py8q
sed -i 's/ and moved._version == version//' /tmp/py8p/mxbi/torch.py
sed -i 's/np.array_equal(host.view(np.uint8), x.view(np.uint8))/np.array_equal(host, x)/' /tmp/py8q/mxbi/torch.py
grep -c "_version == version" /tmp/py8p/mxbi/torch.py; grep -c "array_equal(host, x)" /tmp/py8q/mxbi/torch.py
for p in py8p py8q; do PYTHONPATH=/tmp/$p python3 -m pytest python/tests/test_torch.py -q -p no:cacheprovider -k small_operands > $OUT/plant_$p.txt 2>&1; echo planted $p rc $?; tail -1 $OUT/plant_$p.txt; done
python3 - <<'P'
import json,os,statistics
from collections import defaultdict
g=defaultdict(list)
for l in open(os.environ['OUT']+'/micro5.txt'):
    if not l.startswith('{'): print(l.strip()[:300]); continue
    d=json.loads(l); g[(d['m'],d['n'],d['pkg'])].append(d)
for key,rs in sorted(g.items()):
    t=defaultdict(list)
    for r in rs:
        for w,x in r['timings']: t[w].append(x)
    print(key, len(rs), 'med', round(statistics.median(r['s'] for r in rs),4), [r['s'] for r in rs], rs[0]['launches'], set(r['dis'] for r in rs), 'launch', round(statistics.median(t['probe launches ('][:]),4))
P
