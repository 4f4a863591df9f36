"""Generate the vector files of reference/orders/ from exact_orders.py:
vectors.jsonl.gz (random cases), parse_vectors.jsonl (parse_cases.py) and
edge_vectors.jsonl (edge_cases.py).

    python3 reference/orders/gen_vectors.py [OUT_DIR]   # write the three files
    python3 reference/orders/gen_vectors.py --check     # exit 1 if a committed file differs

Deterministic: fixed seeds (one per spelling, from its CRC-32), gzip with
mtime=0 and no file name. Standard library only.
"""

import gzip
import io
import json
import os
import random
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import exact_orders as E  # noqa: E402
import edge_cases  # noqa: E402
import parse_cases  # noqa: E402

KS = [1, 5, 16, 17, 32, 33, 64, 100, 128, 200, 256, 300]
MX_KS = [32, 64, 128, 256]
N_RANDOM = 40

PLAIN = [
    'fma', 'muladd', 'fma;ktile=128;tile=fresh', 'fma;split=4;reduce=serial',
    'fma;split=4;reduce=pairwise', 'fma;split=4/interleave;ktile=64;reduce=serial',
    'fma;lanes=32;reduce=butterfly', 'fma;split=3;reduce=pairwise',
    'muladd;ktile=32;tile=fresh;reduce=pairwise', 'mma(k=16,f=25)', 'mma(k=32,f=13,out=13)',
    'hopper-bf16', 'hopper-f16', 'hopper-fp8-wgmma', 'hopper-fp8-mma-sync', 'ampere-bf16',
    'ada-fp8', 'deepgemm-fp8', 'hopper-bf16;split=2;reduce=serial', 'fma;out=bf16',
    'fma;out=f16', 'hopper-bf16;out=bf16', 'fma;lanes=4;ktile=16;tile=fresh;reduce=serial',
    'muladd;lanes=8;ktile=32;tile=fresh', 'hopper-bf16;lanes=2;ktile=32;tile=fresh;reduce=pairwise',
    'fma;ktile=4;split=8/interleave;reduce=butterfly', 'hopper-bf16;split=4;reduce=butterfly',
    'fma;split=3;align=8', 'hopper-bf16;split=3;align=32;out=bf16',
]
MX = [
    'fma;scale=dequant', 'fma;scale=block', 'muladd;scale=block',
    'fma;scale=block;split=2;reduce=pairwise', 'blackwell-mxf8f6f4',
    'hopper-fp8-wgmma;scale=block;promote=32', 'fma;scale=block;lanes=2;ktile=2;tile=fresh;reduce=serial',
]

# ---------------------------------------------------------------- inputs


def f32_bits(neg, e_unb, mant):
    return (neg << 31) | ((e_unb + 127) << 23) | mant


def gen_f32(r, flavour):
    c = r.random()
    if flavour == 'zeros' and c < 0.3:
        return r.choice([0, 0x80000000])
    if flavour == 'tiny':  # products in the f32 subnormal range
        return f32_bits(r.getrandbits(1), r.randint(-78, -62), r.getrandbits(23))
    if flavour == 'f16wide':  # keeps out=f16 results mostly finite
        return f32_bits(r.getrandbits(1), r.randint(-8, 4), r.getrandbits(23))
    if flavour == 'f16tiny':  # results in the f16 subnormal range
        return f32_bits(r.getrandbits(1), r.randint(-16, -9), r.getrandbits(23))
    if flavour == 'sub':
        if c < 0.3:
            return (r.getrandbits(1) << 31) | r.getrandbits(23)  # f32 subnormal (or 0)
        if c < 0.7:  # tiny: products land in / below the subnormal range
            return f32_bits(r.getrandbits(1), r.randint(-80, -60), r.getrandbits(23))
    return f32_bits(r.getrandbits(1), r.randint(-30, 30), r.getrandbits(23))


def gen_bf16(r, flavour):
    c = r.random()
    if flavour == 'zeros' and c < 0.3:
        return r.choice([0, 0x80000000])
    if flavour == 'sub' and c < 0.3:
        return ((r.getrandbits(1) << 15) | r.getrandbits(7)) << 16  # bf16 subnormal
    if flavour == 'sub' and c < 0.6:
        return f32_bits(r.getrandbits(1), r.randint(-126, -100), r.getrandbits(7) << 16)
    return f32_bits(r.getrandbits(1), r.randint(-30, 30), r.getrandbits(7) << 16)


def f16_to_f32(h):
    return E.f32_encode(E._decode(h, 5, 10))


def gen_f16(r, flavour):
    c = r.random()
    if flavour == 'zeros' and c < 0.3:
        return r.choice([0, 0x80000000])
    if flavour == 'sub' and c < 0.4:
        return f16_to_f32((r.getrandbits(1) << 15) | r.getrandbits(10))  # f16 subnormal
    return f16_to_f32((r.getrandbits(1) << 15) | (r.randint(1, 30) << 10) | r.getrandbits(10))


def rand_e4m3_code(r):
    while True:
        c = r.getrandbits(8)
        if c & 0x7F != 0x7F:
            return c


def rand_e5m2_code(r):
    while True:
        c = r.getrandbits(8)
        if (c >> 2) & 0x1F != 0x1F:
            return c


def gen_e4m3(r, flavour):
    if flavour == 'zeros' and r.random() < 0.3:
        return r.choice([0, 0x80000000])
    if flavour == 'sub' and r.random() < 0.4:
        return E.f32_encode(E.e4m3_decode((r.getrandbits(1) << 7) | r.getrandbits(3)))
    return E.f32_encode(E.e4m3_decode(rand_e4m3_code(r)))


def gen_e5m2(r, flavour):
    if flavour == 'zeros' and r.random() < 0.3:
        return r.choice([0, 0x80000000])
    return E.f32_encode(E.e5m2_decode(rand_e5m2_code(r)))


GENS = {'f32': gen_f32, 'bf16': gen_bf16, 'f16': gen_f16, 'e4m3': gen_e4m3, 'e5m2': gen_e5m2}


def pick_mn(r, k):
    if k >= 200:
        return 1, r.randint(1, 2)
    if k >= 100:
        return r.randint(1, 2), r.randint(1, 2)
    if k >= 32:
        return r.randint(1, 3), r.randint(1, 3)
    return r.randint(1, 4), r.randint(1, 4)


def cancel_case(r, m, n, k):
    """Products exactly representable and small in range, in +p/-p pairs
    (k, k+1): every partial sum is exact, the result is exactly 0."""
    def short(bits):
        return f32_bits(r.getrandbits(1), r.randint(-3, 3), r.getrandbits(bits) << (23 - bits))
    a = [short(8) for _ in range(m * k)]
    b = [short(8) for _ in range(k * n)]
    for kk in range(0, k - 1, 2):
        for i in range(m):
            a[i * k + kk + 1] = a[i * k + kk]
        for j in range(n):
            b[(kk + 1) * n + j] = b[kk * n + j] ^ 0x80000000
    if k % 2:  # odd K: make the last product zero
        for i in range(m):
            a[i * k + k - 1] = 0x80000000
    return a, b


def plain_cases(spell, r):
    cfg = E.parse(spell)
    T = cfg['mma']['in'] if cfg['family'] == 'mma' else 'f32'
    gen = GENS[T]
    cases = []
    flavours = ['wide'] * 22 + ['zeros'] * 6 + ['sub'] * 6 + ['tiny' if T == 'f32' else 'wide'] * 6
    if cfg['out'] == 'f16':
        flavours = ['f16wide'] * 24 + ['wide'] * 4 + ['f16tiny'] * 8 + ['sub'] * 4
    r.shuffle(flavours)
    for idx in range(N_RANDOM):
        k = KS[idx % len(KS)]
        m, n = pick_mn(r, k)
        fl = flavours[idx]
        a = [gen(r, fl) for _ in range(m * k)]
        b = [gen(r, fl) for _ in range(k * n)]
        cases.append((m, n, k, a, b))
    if spell in ('fma', 'muladd', 'fma;split=4;reduce=pairwise', 'fma;lanes=32;reduce=butterfly'):
        for k in (2, 16, 17, 64, 100):
            m, n = pick_mn(r, k)
            a, b = cancel_case(r, m, n, k)
            cases.append((m, n, k, a, b))
        # signed zeros only
        cases.append((2, 2, 3, [0x80000000, 0, 0x80000000, 0x80000000, 0x80000000, 0x80000000],
                      [0, 0x80000000, 0x80000000, 0, 0, 0]))
    if spell in ('fma', 'hopper-bf16'):
        cases.extend(special_cases(r, gen))
    return cases


INF, NINF, NAN = 0x7F800000, 0xFF800000, 0x7FC00000


def special_cases(r, gen):
    out = []
    one = 0x3F800000
    # (k, a row, b column) for M = N = 1, plus one 2x2
    rows = [
        (3, [INF, one, one], [one, one, one]),                 # Inf
        (3, [INF, one, NINF], [one, one, one]),                # Inf - Inf
        (3, [one, INF, one], [one, 0, one]),                   # Inf * 0
        (3, [one, NAN, one], [one, one, one]),                 # NaN
        (17, [gen(r, 'wide') for _ in range(16)] + [NINF], [gen(r, 'wide') for _ in range(16)] + [0x40000000]),
        (5, [NINF, one, one, one, one], [0x80000000 | one, one, one, one, one]),  # -Inf * -1
    ]
    for k, a, b in rows:
        out.append((1, 1, k, a, b))
    out.append((2, 2, 2, [INF, one, one, 0], [one, 0, 0, one]))   # mix: Inf, NaN (Inf*0), finite
    return out


def mx_cases(spell, r):
    cfg = E.parse(spell)
    cases = []
    n_cases = N_RANDOM + 4
    for idx in range(n_cases):
        k = MX_KS[idx % len(MX_KS)]
        m, n = pick_mn(r, k)
        if cfg['family'] == 'mma':
            fmt = 'mxfp8-e4m3'
        else:
            fmt = 'mxfp8-e4m3' if idx % 2 == 0 else 'mxfp8-e5m2'
        rc = rand_e4m3_code if fmt == 'mxfp8-e4m3' else rand_e5m2_code
        zeros = idx % 5 == 4
        def code():
            if zeros and r.random() < 0.3:
                return r.choice([0x00, 0x80])
            return rc(r)
        nb = k // 32
        ac = [code() for _ in range(m * k)]
        bc = [code() for _ in range(k * n)]
        asc = [r.randint(100, 150) for _ in range(m * nb)]
        bsc = [r.randint(105, 150) for _ in range(nb * n)]
        if idx >= N_RANDOM:  # extra: some 0x00 scales, and one 0xFF
            for t in range(len(asc)):
                if r.random() < 0.5:
                    asc[t] = 0x00
            if idx == n_cases - 1:
                asc[0] = 0xFF
        cases.append((m, n, k, fmt, ac, asc, bc, bsc))
    return cases


def random_lines():
    """The random vectors (vectors.jsonl.gz), one JSON line per case."""
    lines = []
    counts = {}
    for spell in PLAIN:
        r = random.Random(zlib.crc32(spell.encode()))
        for m, n, k, a, b in plain_cases(spell, r):
            c = E.gemm(spell, m, n, k, a=a, b=b)
            lines.append(json.dumps({'order': spell, 'm': m, 'n': n, 'k': k,
                                     'a': E.hex32(a), 'b': E.hex32(b), 'c': E.hex32(c)},
                                    separators=(',', ':')))
            counts[spell] = counts.get(spell, 0) + 1
    for spell in MX:
        r = random.Random(zlib.crc32(spell.encode()))
        for m, n, k, fmt, ac, asc, bc, bsc in mx_cases(spell, r):
            c = E.gemm(spell, m, n, k, mx=dict(format=fmt, a_codes=ac, a_scales=asc, b_codes=bc, b_scales=bsc))
            lines.append(json.dumps({'order': spell, 'm': m, 'n': n, 'k': k, 'format': fmt,
                                     'a_codes': hex8(ac), 'a_scales': hex8(asc),
                                     'b_codes': hex8(bc), 'b_scales': hex8(bsc), 'c': E.hex32(c)},
                                    separators=(',', ':')))
            counts[spell] = counts.get(spell, 0) + 1
    return lines, counts


def hex8(xs):
    return ['%02x' % x for x in xs]


def parse_lines():
    """parse_vectors.jsonl: one spelling per line (parse_cases.py)."""
    return [json.dumps(v, separators=(',', ':')) for v in parse_cases.vectors()]


def edge_lines():
    """edge_vectors.jsonl: the fused-sum edge cases (edge_cases.py)."""
    lines = []
    for c in edge_cases.cases():
        d = {'what': c['what'], 'note': c['note'], 'order': c['order'], 'm': c['m'], 'n': c['n'], 'k': c['k']}
        if 'format' in c:
            d.update(format=c['format'], a_codes=hex8(c['a_codes']), a_scales=hex8(c['a_scales']),
                     b_codes=hex8(c['b_codes']), b_scales=hex8(c['b_scales']))
        else:
            d.update(a=E.hex32(c['a']), b=E.hex32(c['b']))
        d.update(c=E.hex32(c['c']), foil=c['foil'], foil_c=E.hex32(c['foil_c']) if c['foil_c'] else None)
        lines.append(json.dumps(d, separators=(',', ':')))
    return lines


def text(lines):
    return ('\n'.join(lines) + '\n').encode()


def gz(data):
    buf = io.BytesIO()
    with gzip.GzipFile(filename='', fileobj=buf, mode='wb', compresslevel=9, mtime=0) as g:
        g.write(data)
    return buf.getvalue()


def small_files():
    """{file name: bytes} of the hand-built vector files."""
    return {'parse_vectors.jsonl': text(parse_lines()), 'edge_vectors.jsonl': text(edge_lines())}


def check(names=None):
    """Compare the committed vector files with a fresh generation; returns
    the names that differ. The .gz file is compared decompressed."""
    bad = []
    files = small_files()
    if names is None or 'vectors.jsonl.gz' in names:
        files['vectors.jsonl.gz'] = text(random_lines()[0])
    for name, want in files.items():
        if names is not None and name not in names:
            continue
        with open(os.path.join(HERE, name), 'rb') as f:
            have = f.read()
        if name.endswith('.gz'):
            have = gzip.decompress(have)
        if have != want:
            bad.append(name)
    return bad


def main():
    if sys.argv[1:] == ['--check']:
        bad = check()
        print('differ from a fresh generation: ' + ', '.join(bad) if bad else 'all vector files are up to date')
        sys.exit(1 if bad else 0)
    out_dir = sys.argv[1] if len(sys.argv) > 1 else HERE
    lines, counts = random_lines()
    data = gz(text(lines))
    with open(os.path.join(out_dir, 'vectors.jsonl.gz'), 'wb') as f:
        f.write(data)
    for s, c in counts.items():
        print(f'{c:4d}  {s}')
    print(f'{len(lines)} cases, {len(data)} bytes -> {out_dir}/vectors.jsonl.gz')
    for name, body in small_files().items():
        with open(os.path.join(out_dir, name), 'wb') as f:
            f.write(body)
        print(f'{len(body.splitlines())} lines, {len(body)} bytes -> {out_dir}/{name}')


if __name__ == '__main__':
    main()
