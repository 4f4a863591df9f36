import sys, time, statistics, os, json
sys.path.insert(0, 'reference/bench')  # run from the repository root
import numpy as np, torch
import mxbi
import reveal_fprev as rf
DEV = torch.device('cuda')
def med(f, n=7):
    ts=[]
    for _ in range(n):
        torch.cuda.synchronize(); t=time.perf_counter(); f(); torch.cuda.synchronize(); ts.append(time.perf_counter()-t)
    return round(statistics.median(ts)*1e3, 2)
if os.environ.get('MICRO'):
    b = np.ones((4096,4096), np.float32); b2 = np.empty_like(b)
    dev = torch.empty((4096,4096), device=DEV)
    pin = torch.empty((4096,4096)).pin_memory()
    res = {}
    res['np copyto 64MiB ms'] = med(lambda: np.copyto(b2, b))
    res['torch cpu copy_ (threads) ms'] = med(lambda: torch.from_numpy(b2).copy_(torch.from_numpy(b)))
    res['from_numpy.to(cuda) pageable ms'] = med(lambda: torch.from_numpy(b).to(DEV))
    res['dev.copy_(pageable) ms'] = med(lambda: dev.copy_(torch.from_numpy(b)))
    res['dev.copy_(pinned) ms'] = med(lambda: dev.copy_(pin))
    res['pinned.copy_(numpy) ms'] = med(lambda: pin.copy_(torch.from_numpy(b)))
    print(json.dumps(res))
mm, name = rf.triton_f32()
parts = {'h2d':0.0, 'kern':0.0, 'd2h':0.0, 'calls':0}
def fn(a, bb):
    t0=time.perf_counter()
    ta=torch.from_numpy(a).to(DEV); tb=torch.from_numpy(bb).to(DEV); torch.cuda.synchronize()
    t1=time.perf_counter(); c=mm(ta,tb); torch.cuda.synchronize(); t2=time.perf_counter()
    o=c.cpu().numpy(); t3=time.perf_counter()
    parts['h2d']+=t1-t0; parts['kern']+=t2-t1; parts['d2h']+=t3-t2; parts['calls']+=1
    return o
for (m,n) in [(1,4096),(64,4096),(4096,64),(64,64),(1,64)]:
    fn(np.ones((m,4096),np.float32), np.ones((4096,n),np.float32))
    mxbi.reveal(fn, m, 4096, n, name=name)
    for rnd in range(2):
        for kk in parts: parts[kk]=0 if kk=='calls' else 0.0
        t=time.perf_counter(); r=mxbi.reveal(fn, m, 4096, n, name=name); t=time.perf_counter()-t
        print(json.dumps({'pkg':os.environ.get('PKG'),'m':m,'n':n,'s':round(t,4),'launches':r.launches,'parts':{k:round(v,4) for k,v in parts.items()},'timings':[(w,round(x,4)) for w,x in r.timings]}))
