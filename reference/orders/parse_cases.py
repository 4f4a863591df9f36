"""Parse vectors: order spellings that must parse (with their canonical form)
and spellings that must be rejected (with the reason class and the text the
message names), as exact_orders.parse reads docs/ORDERS.md ("Spelling",
"Parsing rules"). tests/orders_reference.rs checks that Rust agrees on every
one. Standard library only; deterministic.
"""

import random
import zlib

import exact_orders as E

# Hand-picked: the grammar's corners, the spellings Rust and Python once
# disagreed on, and one example of every error class.
HAND = [
    # whitespace (Unicode White_Space) is ignored anywhere
    'fma', 'muladd', ' fma ; split = 4 ', 'fma\t;split=4\n', 'fma\u00a0;\u3000split=4', 'm m a ( k = 1 6 , f = 2 5 )',
    'fma\x1c;split=4',  # U+001C is not White_Space (Python's str.split would drop it)
    'fma\u200b;split=4',  # nor is U+200B (zero-width space)
    # integers: ASCII digits, no sign, leading zeros allowed, at most 2^32 - 1
    'fma;split=04', 'fma;split=+4', 'fma;split=-1', 'fma;split=0', 'fma;split=4294967295',
    'fma;split=4294967296', 'fma;split=\u0664', 'fma;split=\u00b2', 'fma;split=4.0', 'fma;split=',
    'fma;ktile=4294967295;tile=fresh', 'fma;ktile=0;tile=fresh', 'fma;lanes=0', 'hopper-bf16;promote=0',
    # a key at its default value is no key
    'fma;lanes=1', 'fma;lanes=1;split=2', 'fma;lanes=1;ktile=4;tile=fresh', 'fma;lanes=1;reduce=butterfly',
    'fma;lanes=1;reduce=pairwise', 'fma;split=1', 'fma;split=1;lanes=4', 'fma;tile=carry', 'fma;reduce=serial',
    'fma;out=f32', 'fma;scale=dequant', 'mma(k=16,f=25,out=23,split=none,c=fused,in=bf16)',
    # keys without effect are dropped from the canonical form
    'fma;ktile=64', 'fma;ktile=64;tile=carry', 'fma;ktile=64;split=2', 'fma;reduce=pairwise',
    'fma;split=1/interleave;ktile=4', 'fma;lanes=4;reduce=butterfly', 'hopper-bf16;ktile=64',
    # interleave and fresh tiles need ktile
    'fma;split=2/interleave', 'fma;split=2/interleave;ktile=8', 'fma;split=2/interleave;ktile=8;tile=fresh',
    'fma;tile=fresh', 'fma;split=2;tile=fresh', 'fma;ktile=8;tile=fresh', 'fma;split=/interleave',
    'fma;split=2/Interleave', 'fma;split=2/interleave/interleave', 'fma;split=2/',
    # lanes
    'fma;lanes=4;split=2', 'fma;lanes=4;ktile=4', 'fma;lanes=4;split=1/interleave', 'fma;lanes=3',
    'fma;lanes=3;reduce=butterfly', 'fma;lanes=3;reduce=serial', 'fma;lanes=3;reduce=pairwise',
    'fma;reduce=butterfly', 'fma;split=4;reduce=butterfly', 'fma;lanes=4;split=2;tile=fresh',
    # lanes cut into fresh k-tiles (ktile a multiple of lanes)
    'fma;lanes=4;ktile=8;tile=fresh', 'fma;lanes=16;ktile=512;tile=fresh;reduce=serial',
    'muladd;tile=fresh;lanes=8;ktile=64;reduce=butterfly', 'fma;lanes=4;ktile=4;tile=fresh;reduce=pairwise',
    'fma;lanes=4;ktile=6;tile=fresh', 'fma;lanes=4;tile=fresh', 'fma;lanes=4;ktile=8;tile=carry',
    'fma;lanes=4;ktile=8;tile=fresh;split=2', 'fma;lanes=4;split=2/interleave;ktile=8;tile=fresh',
    'fma;lanes=4;split=1/interleave;ktile=8;tile=fresh', 'fma;lanes=3;ktile=6;tile=fresh',
    'fma;lanes=3;ktile=6;tile=fresh;reduce=serial', 'hopper-bf16;lanes=2;ktile=32;tile=fresh',
    'mma(k=32,f=13,out=13);tile=fresh;lanes=8;ktile=256', 'deepgemm-fp8;lanes=4;ktile=64;tile=fresh',
    'fma;scale=block;lanes=2;ktile=2;tile=fresh', 'hopper-fp8-wgmma;scale=block;promote=32;lanes=2;ktile=64;tile=fresh',
    'muladd;lanes=8;ktile=64;out=bf16', 'fma;lanes=1;ktile=8;tile=carry',
    # butterfly over the parts of a split (S a power of two)
    'fma;ktile=64;split=16/interleave;reduce=butterfly', 'fma;split=2;reduce=butterfly',
    'fma;split=3;reduce=butterfly', 'fma;ktile=8;split=6/interleave;reduce=butterfly',
    'fma;split=1/interleave;ktile=4;reduce=butterfly', 'fma;split=1;reduce=butterfly',
    'hopper-bf16;split=4;ktile=32;tile=fresh;reduce=butterfly', 'fma;lanes=1;split=8;reduce=butterfly',
    'fma;ktile=16;tile=fresh;reduce=butterfly', 'muladd;split=8;reduce=butterfly;out=bf16',
    # presets: keys the preset does not set may follow; one it sets may not
    'hopper-bf16;split=4;reduce=pairwise', 'deepgemm-fp8;split=2', 'deepgemm-fp8;promote=64',
    'deepgemm-fp8;promote=128', 'mma(k=32,f=13,out=13,in=e4m3);promote=64', 'blackwell-mxf8f6f4;scale=fused',
    'blackwell-mxf8f6f4;scale=block;promote=32', 'blackwell-mxf8f6f4;promote=32', 'blackwell-mxf8f6f4;out=bf16',
    'hopper-fp8-wgmma;scale=block;promote=32', 'hopper-fp8-wgmma;scale=block', 'hopper-fp8-wgmma;scale=block;promote=64',
    'deepgemm-fp8;promote=64;bogus=1', 'Hopper-bf16', 'hopper-bf16()', 'hopper_bf16',
    # mma parameters: any order, each once, no empty one, k >= 1, 1 <= f <= 60, 1 <= out <= 23
    'mma(f=25,k=16)', 'mma(in=f16,c=late,k=8,f=25)', 'mma(k=32,f=13,in=e4m3)', 'mma(k=32,f=13,in=bf16)',
    'mma(k=16,f=25,in=e4m3)', 'mma(k=1,f=1,out=1)', 'mma(k=4294967295,f=60,out=23)', 'mma(k=2,f=25,split=halves)',
    'mma(k=4,f=25,split=mod4)', 'mma(k=32,f=25,c=late)', 'mma(k=0,f=25)', 'mma(k=16,f=0)', 'mma(k=16,f=61)',
    'mma(k=16,f=25,out=0)', 'mma(k=16,f=25,out=24)', 'mma(k=16,f=25,split=thirds)', 'mma(k=16,f=25,c=early)',
    'mma(k=16,f=25,in=f64)', 'mma(k=16,f=25,in=BF16)', 'mma(k=16,f=25,q=1)', 'mma(k=16,,f=25)', 'mma(k=16,f=25,)',
    'mma(k=16,f)', 'mma()', 'mma(k=16)', 'mma(f=25)', 'mma(k=16,k=32,f=25)', 'mma(k=16,f=25,f=25)',
    'mma(k=15,f=25,split=halves)', 'mma(k=6,f=25,split=mod4)', 'mma(k=15,f=99,split=halves)',
    'mma(k=15,split=halves)', 'mma(k=16,f=25', 'mma(k=16,f=25))', 'mma[k=16,f=25]', 'mma(k=16;f=25)',
    'MMA(k=16,f=25)', 'mma(k=16,f=25);', 'mma(k=16,f=25)x',
    # structure
    '', '   ', ';', 'fma;', 'fma;;split=2', 'fma;split', 'fmx', 'FMA', 'fma(k=1)', 'fmx;foo', 'fma;foo;split=0',
    'fma;splt=4', 'fma;=4', 'fma;Split=4', 'fma;split=4=5', 'fma;split=2;split=3', 'fma;split=2;split=2',
    'fma;foo=1;foo=2', 'fma;tile=new', 'fma;reduce=tree', 'fma;scale=none', 'fma;out=f64',
    # promote / scale
    'fma;promote=32', 'muladd;promote=32', 'hopper-bf16;promote=24', 'hopper-bf16;promote=48', 'fma;scale=fused',
    'fma;scale=block', 'fma;scale=block;split=2;reduce=pairwise', 'hopper-bf16;scale=fused',
    'mma(k=32,f=13,out=13);scale=fused', 'mma(k=32,f=13,out=13);scale=fused;promote=64',
    # align: contiguous split parts start on multiples of A (1 is no key)
    'fma;split=3;align=128', 'fma;align=128;split=3', 'hopper-bf16;split=3;align=64;out=bf16', 'fma;split=3;align=1',
    'fma;split=3;align=0', 'fma;split=3;align=x', 'fma;align=128', 'fma;split=1;align=8',
    'fma;split=4/interleave;ktile=8;align=16', 'fma;lanes=4;align=8', 'fma;split=2;align=8;align=8',
    'fma;split=2;align=16;ktile=4;tile=fresh;reduce=pairwise', 'hopper-bf16;split=4;align=32;reduce=butterfly',
    # every key, out of table order
    'fma;out=f16;split=2;ktile=3;tile=fresh', 'muladd;out=bf16;reduce=pairwise;tile=fresh;split=2/interleave;ktile=32',
]

FAMILIES = ['fma', 'muladd', 'hopper-bf16', 'mma(k=32,f=13,out=13)', 'deepgemm-fp8', 'blackwell-mxf8f6f4',
            'mma(k=12,f=24,split=mod4,in=f16)']
SUFFIXES = ['', 'ktile=64', 'ktile=64;tile=fresh', 'tile=fresh', 'split=3', 'split=4/interleave',
            'split=4/interleave;ktile=64', 'split=2;ktile=32;tile=fresh', 'lanes=32', 'lanes=6', 'lanes=6;reduce=pairwise',
            'lanes=8;split=2', 'reduce=pairwise', 'reduce=butterfly', 'split=2;reduce=butterfly', 'promote=64',
            'promote=96', 'promote=32;scale=block', 'scale=block', 'scale=fused', 'scale=dequant', 'out=bf16',
            'out=f16;split=2;reduce=pairwise', 'ktile=32;split=2/interleave;tile=fresh;reduce=pairwise;out=bf16']
MMA_VALUES = {
    'k': ['1', '2', '3', '4', '8', '16', '32'],
    'f': ['0', '1', '13', '24', '25', '60', '61'],
    'out': [None, '0', '1', '13', '23', '24'],
    'split': [None, 'none', 'halves', 'mod4'],
    'c': [None, 'fused', 'late'],
    'in': [None, 'bf16', 'f16', 'e4m3', 'e5m2', 'f32'],
}
N_MMA = 120


def spellings():
    """The spellings, deterministic: the hand list, every family with every
    key set (keys in a shuffled order), random mma(...) parameter sets."""
    r = random.Random(zlib.crc32(b'parse vectors'))
    out = list(HAND)
    for fam in FAMILIES:
        for suf in SUFFIXES:
            keys = [x for x in suf.split(';') if x]
            r.shuffle(keys)
            out.append(';'.join([fam] + keys))
    for _ in range(N_MMA):
        params = [f'{k}={v}' for k, vals in MMA_VALUES.items() for v in [r.choice(vals)] if v is not None]
        r.shuffle(params)
        out.append('mma(' + ','.join(params) + ')')
    seen = set()
    return [s for s in out if not (s in seen or seen.add(s))]


def vector(spec):
    """One parse vector: {spec, canonical} or {spec, error, names}."""
    try:
        cfg = E.parse(spec)
    except E.OrderError as e:
        assert e.kind in E.KINDS and e.item in str(e), (spec, e.kind, str(e))
        return {'spec': spec, 'error': e.kind, 'names': e.item}
    canon = E.canonical(cfg)
    assert E.canonical(canon) == canon, (spec, canon)  # canonical is a fixed point
    return {'spec': spec, 'canonical': canon}


def vectors():
    return [vector(s) for s in spellings()]
