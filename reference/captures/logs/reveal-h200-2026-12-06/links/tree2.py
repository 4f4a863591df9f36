import sys, torch, mxbi
import mxbi.torch as mt
torch.backends.cuda.matmul.allow_tf32 = False
fn = mt.on_device(lambda a, b: torch.matmul(a, b))
out = sys.argv[1]
with open(out, "w") as f:
    for (m, n) in [(1, 64)]:
        r = mxbi.reveal(fn, m, 4096, n)
        f.write(f"=== torch.matmul f32 M={m} K=4096 N={n} ({torch.cuda.get_device_name()}): launches {r.launches}\n")
        f.write(str(r) + "\n")
        f.write(r.listing() + "\n")
