import sys, time, statistics, os, json
import numpy as np, torch
import mxbi, mxbi.torch
torch.backends.cuda.matmul.allow_tf32 = False
DEV = torch.device('cuda')
T = {}
IDS = set()
def tick(k, t0):
    T[k] = T.get(k, 0.0) + time.perf_counter() - t0
staged = {}
def upload(x, which):
    t0 = time.perf_counter()
    src = torch.from_numpy(np.ascontiguousarray(x))
    if src.numel() * 4 < (1 << 20):
        r = src.to(DEV); tick('small_up', t0); return r
    buf, done = staged.get(which, (None, None))
    if buf is None or buf.shape != src.shape:
        buf, done = torch.empty(src.shape, dtype=src.dtype).pin_memory(), None
    if done is not None:
        done.synchronize()
    tick('wait', t0); t0 = time.perf_counter()
    buf.copy_(src)
    tick('pin_copy', t0); t0 = time.perf_counter()
    moved = buf.to(device=DEV, non_blocking=True)
    done = torch.cuda.Event(); done.record(torch.cuda.current_stream(DEV))
    staged[which] = (buf, done)
    tick('dma_issue', t0)
    return moved
last = [None]
def fn(a, b):
    t0 = time.perf_counter()
    if last[0] is not None: tick('between_calls', last[0])
    ta = upload(a, 'a'); tb = upload(b, 'b')
    t1 = time.perf_counter()
    c = ta @ tb
    tick('mm_issue', t1); t1 = time.perf_counter()
    torch.cuda.synchronize()
    tick('sync', t1); t1 = time.perf_counter()
    o = c.cpu().numpy()
    tick('d2h', t1)
    tick('py_total', t0)
    T['calls'] = T.get('calls', 0) + 1
    T['refs_a'] = sys.getrefcount(a); IDS.add(id(b))
    last[0] = time.perf_counter()
    return o
od = mxbi.torch.on_device(lambda a, b: a @ b, device=DEV, synchronize=False)
for (m, n) in [(64, 4096), (4096, 64), (64, 64), (1, 64)]:
    for label, f in [('timed', fn), ('on_device', od)]:
        f(np.ones((m, 4096), np.float32), np.ones((4096, n), np.float32))
        mxbi.reveal(f, m, 4096, n)
        for rnd in range(3):
            T.clear(); IDS.clear(); last[0] = None
            t = time.perf_counter(); r = mxbi.reveal(f, m, 4096, n); t = time.perf_counter() - t
            T['id_b'] = len(IDS)
            print(json.dumps({'m': m, 'n': n, 'subject': label, 's': round(t, 4), 'launches': r.launches, 'order': str(r.order),
                              'parts': {k: (round(v, 4) if isinstance(v, float) else v) for k, v in T.items()},
                              'timings': [(w[:16], round(x, 4)) for w, x in r.timings]}), flush=True)
