"""Self-tests for exact_orders.py. Run: python3 reference/orders/test_exact_orders.py"""

import os
import random
import struct
import sys
from fractions import Fraction as Q

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import exact_orders as E  # noqa: E402
import gen_vectors  # noqa: E402


def b(x):
    """f32 bits of a Python float that is exactly an f32 (struct, no arithmetic)."""
    return struct.unpack('<I', struct.pack('<f', x))[0]


def fq(q):
    """f32 bits of an exact rational that must be representable."""
    bits = E.rn_f32_fraction(Q(q))
    assert E.value_to_fraction_or_special(bits) == Q(q), q
    return bits


def val(bits):
    return E.value_to_fraction_or_special(bits)


ONE = b(1.0)
P2 = lambda e: Q(2) ** e  # noqa: E731


def g1(spec, a, bb):
    """1 x 1 output, K = len(a)."""
    return E.gemm(spec, 1, 1, len(a), a=a, b=bb)[0]


def test_rn_f32():
    assert E.rn_f32_fraction(Q(1, 3)) == 0x3EAAAAAB
    assert E.rn_f32_fraction(P2(-149)) == 0x00000001
    assert E.rn_f32_fraction(P2(-150)) == 0x00000000                  # tie -> even (0)
    assert E.rn_f32_fraction(-P2(-150)) == 0x80000000                 # sign kept
    assert E.rn_f32_fraction(3 * P2(-150)) == 0x00000002              # tie -> even (2)
    assert E.rn_f32_fraction(P2(-150) + P2(-200)) == 0x00000001       # just above the tie
    assert E.rn_f32_fraction(P2(-126) - P2(-150)) == 0x00800000       # rounds up into the normals
    assert E.rn_f32_fraction(P2(128)) == 0x7F800000
    assert E.rn_f32_fraction((2 - P2(-24)) * P2(127)) == 0x7F800000   # tie at max -> Inf
    assert E.rn_f32_fraction((2 - P2(-23)) * P2(127)) == 0x7F7FFFFF
    assert E.rn_f32_fraction((2 - P2(-24) - P2(-60)) * P2(127)) == 0x7F7FFFFF
    assert E.rn_f32_fraction(1 + P2(-24)) == 0x3F800000               # tie -> even
    assert E.rn_f32_fraction(1 + 3 * P2(-24)) == 0x3F800002
    assert E.rn_f32_fraction(Q(-1, 10)) == b(-0.1)


def test_round_rz():
    # RZ to 1+O bits with the f32 exponent range
    r = E.round_dyadic(False, (1 << 30) - 1, -30, 14, -126, 127, 'RZ')  # just below 1
    assert E.to_fraction(r) == 1 - P2(-14)
    r = E.round_dyadic(True, 3, 200, 24, -126, 127, 'RZ')  # beyond max -> max (RZ)
    assert E.f32_encode(r) == 0xFF7FFFFF
    r = E.round_dyadic(False, 3, 200, 14, -126, 127, 'RZ')
    assert E.to_fraction(r) == (2 - P2(-13)) * P2(127)
    r = E.round_dyadic(False, 3, -142, 14, -126, 127, 'RZ')  # subnormal quantum 2^-139
    assert E.to_fraction(r) == 0
    r = E.round_dyadic(False, 3, -139, 14, -126, 127, 'RZ')
    assert E.to_fraction(r) == 3 * P2(-139)


def test_output_conversion():
    assert E.f32_to_bf16_widened(fq(1 + P2(-8))) == 0x3F800000            # tie -> even
    assert E.f32_to_bf16_widened(fq(1 + 3 * P2(-8))) == fq(1 + P2(-6))    # tie -> even (up)
    assert E.f32_to_bf16_widened(0x7F7FFFFF) == 0x7F800000                 # overflow
    assert E.f32_to_bf16_widened(0xFFC12345) == 0xFFC00000                 # NaN -> 0x7FC0 + sign
    assert E.f32_to_f16_widened(b(65520.0)) == 0x7F800000
    assert E.f32_to_f16_widened(b(65519.0)) == b(65504.0)
    assert E.f32_to_f16_widened(fq(P2(-25))) == 0                          # tie -> 0
    assert E.f32_to_f16_widened(fq(3 * P2(-25))) == fq(P2(-23))            # tie -> even
    assert E.f32_to_f16_widened(fq(-P2(-24))) == fq(-P2(-24))              # min f16 subnormal
    assert g1('fma;out=f16', [b(3.0)], [b(1.0 / 1024 + 1)]) == fq(3 + P2(-8))  # 3+3/1024 -> RNE


def test_fasi_hopper():
    # exact products: bf16 a = b = 1 - 2^-8
    x = fq(1 - P2(-8))
    assert val(g1('hopper-bf16', [x], [x])) == 1 - P2(-7) + P2(-16)
    # binary32 accumulation: 4 products 0.5 * 2^-24 plus c = 1. F=24 (A100) keeps 1;
    # the Hopper model (F=25) keeps one more alignment bit and gives 1 + 2^-23.
    bf = E.f32_decode
    prods = [(bf(b(0.5)), bf(fq(P2(-24))), 0, False)] * 4
    assert E.fused_sum(prods, ONE, 24, 23, -126) == ONE
    assert val(E.fused_sum(prods, ONE, 25, 23, -126)) == 1 + P2(-23)
    # rounding direction (RZ): a = 1, b = [2, 2^-23 + 2^-24] -> exactly 2, and -2 when negated
    a = [ONE, ONE]
    bb = [b(2.0), fq(P2(-23) + P2(-24))]
    assert g1('hopper-bf16', a, bb) == b(2.0)
    assert g1('hopper-bf16', [ONE ^ 0x80000000] * 2, bb) == b(-2.0)
    assert g1('fma', a, bb) == fq(2 + P2(-22))  # RN instead: 2 + 0.75 ulp(2) -> 2 + ulp(2)
    # extra alignment bits: 1*1 + (-(1 - 2^-24))*1 = 2^-24 exactly (in=f32, F=25)
    assert val(g1('mma(k=16,f=25,in=f32)', [ONE, fq(-(1 - P2(-24)))], [ONE, ONE])) == P2(-24)
    # with F=23 the second term loses its last bit: 1 - (1 - 2^-23) = 2^-23
    assert val(g1('mma(k=16,f=24,in=f32)', [ONE, fq(-(1 - P2(-24)))], [ONE, ONE])) == P2(-24)
    assert val(g1('mma(k=16,f=23,in=f32)', [ONE, fq(-(1 - P2(-24)))], [ONE, ONE])) == P2(-23)
    # carry bits: four 1*1 plus c = 1 + 2^-22 + 2^-23 -> 5 + 3*2^-23, RZ to 24 bits -> 5
    prods = [(bf(ONE), bf(ONE), 0, False)] * 4
    assert E.fused_sum(prods, fq(1 + P2(-22) + P2(-23)), 25, 23, -126) == b(5.0)


def test_fused_sum_details():
    bf = E.f32_decode
    # O = 13 (e8m13): 1 + 2^-13 kept, 1 + 2^-14 truncated
    assert val(E.fused_sum([(bf(ONE), bf(ONE), 0, False), (bf(fq(P2(-13))), bf(ONE), 0, False)], 0, 13, 13, -6)) == 1 + P2(-13)
    assert val(E.fused_sum([(bf(ONE), bf(ONE), 0, False), (bf(fq(P2(-14))), bf(ONE), 0, False)], 0, 25, 13, -6)) == 1
    # truncation is toward zero in magnitude per term (negative terms too)
    # 1 - 3*2^-26: t = -floor(1.5) = -1, S = 2^25 - 1, RZ to 24 bits -> 1 - 2^-24
    # (a correctly RZ-rounded exact sum would give 1 - 2^-23)
    s = E.fused_sum([(bf(ONE), bf(ONE), 0, False), (bf(fq(-3 * P2(-26))), bf(ONE), 0, False)], 0, 25, 23, -126)
    assert val(s) == 1 - P2(-24)
    s = E.fused_sum([(bf(ONE), bf(ONE), 0, False), (bf(fq(-3 * P2(-27))), bf(ONE), 0, False)], 0, 25, 23, -126)
    assert val(s) == 1  # t = -floor(0.75) = 0
    # no saturation (H200): 2 * (1.5*2^127 * 2) -> Inf, with its sign
    big = fq(Q(3, 2) * P2(127))
    assert g1('mma(k=16,f=25,in=f32)', [big, big], [b(2.0), b(2.0)]) == 0x7F800000
    assert g1('mma(k=16,f=25,out=13,in=f32)', [big, big], [b(-2.0), b(-2.0)]) == 0xFF800000
    # zero products take no part in the alignment (H200, f16): with C = 2^-3
    # (M = -3) the product 2^-13 * (1 + 2^-10) 2^-13 keeps its 2^-26 bit,
    # although 0 * 2^15 has the nominal exponent -14 + 15 = 1 (M = 1 would
    # truncate it away)
    s = E.fused_sum([(bf(fq(P2(-13))), bf(fq((1 + P2(-10)) * P2(-13))), 0, False), (bf(0), bf(fq(P2(15))), 0, False)],
                    b(0.125), 25, 23, -14)
    assert val(s) == Q(1, 8) + P2(-26)
    # nominal exponent of an f16 subnormal (emin -14) decides the alignment M:
    # 2^-20 * 2^15 has e = -14 + 15 = 1 although its value is 2^-5, so the
    # other product's 2^-28 bit (below 2^(1-25)) is truncated.
    a = [fq(P2(-20)), fq(1 + P2(-10))]
    bb = [fq(P2(15)), fq((1 + P2(-10)) * P2(-8))]
    assert val(g1('hopper-f16', a, bb)) == P2(-5) + P2(-8) + P2(-17)
    assert val(g1('fma', a, bb)) == P2(-5) + P2(-8) + P2(-17) + P2(-28)
    # specials
    inf, ninf, nan = 0x7F800000, 0xFF800000, 0x7FC00000
    assert g1('hopper-bf16', [inf, ONE], [ONE, ONE]) == inf
    assert g1('hopper-bf16', [inf, ONE], [0, ONE]) == E.TC_NAN
    assert g1('hopper-bf16', [inf, ninf], [ONE, ONE]) == E.TC_NAN
    assert g1('hopper-bf16', [nan, ONE], [0, ONE]) == E.TC_NAN
    assert g1('hopper-bf16', [ninf] + [ONE] * 20, [ONE] * 21) == ninf  # carried through C of the next step
    # a zero sum is +0
    assert g1('hopper-bf16', [ONE, ONE], [ONE, ONE ^ 0x80000000]) == 0


def test_mod4_and_late():
    e4 = lambda c: E.f32_encode(E.e4m3_decode(c))  # noqa: E731
    s16, tiny = e4(0x58), e4(0x01)  # 16, 2^-9
    assert val(s16) == 16 and val(tiny) == P2(-9)
    a = [s16, s16 ^ 0x80000000, tiny] + [0] * 29
    bb = [s16, s16, tiny] + [0] * 29
    # mod4: {0,1} sum is exactly 0, {2,3} sum holds 2^-18 exactly
    assert val(g1('hopper-fp8-mma-sync', a, bb)) == P2(-18)
    # one fused sum (F=25) aligned to 2^8 truncates 2^-18 away
    assert g1('mma(k=32,f=25,in=e4m3)', a, bb) == 0
    # halves: same (first half 0, second half tiny)
    assert val(g1('mma(k=32,f=25,split=halves,in=e4m3)', a[:2] + [0] * 14 + [tiny] + [0] * 15,
                  bb[:2] + [0] * 14 + [tiny] + [0] * 15)) == P2(-18)
    # c=late: the chunk sum is formed from +0 and added to C with RN
    x = fq(1 + P2(-3))
    k64a = [x] + [0] * 31 + [fq(P2(-30))] + [0] * 31
    k64b = [ONE] * 64
    late = g1('mma(k=32,f=25,c=late,in=f32)', k64a, k64b)
    fused = g1('mma(k=32,f=25,in=f32)', k64a, k64b)
    assert val(late) == 1 + P2(-3)               # RN(1.125 + 2^-30) = 1.125
    assert val(fused) == 1 + P2(-3)              # truncated in the fused sum
    k64a[32] = fq(P2(-24) + P2(-25))             # 1.5 ulp(1.125)/2 above
    assert val(g1('mma(k=32,f=25,c=late,in=f32)', k64a, k64b)) == 1 + P2(-3) + P2(-23)  # RN up
    assert val(g1('mma(k=32,f=25,in=f32)', k64a, k64b)) == 1 + P2(-3)                   # RZ


def test_in_type_check():
    try:
        g1('hopper-bf16', [fq(1 + P2(-9))], [ONE])
    except E.OrderError as e:
        assert 'a[0]' in str(e)
    else:
        raise AssertionError('not rejected')
    try:
        g1('hopper-fp8-wgmma', [ONE, b(480.0)], [ONE, ONE])
    except E.OrderError as e:
        assert 'a[1]' in str(e)
    else:
        raise AssertionError('not rejected')


def test_fma_vs_exact():
    # small exact values: every partial sum is exact, so fma == exact sum
    a = [b(1.5), b(-0.25), b(3.0), b(0.125)]
    bb = [b(2.0), b(4.0), b(-0.5), b(8.0)]
    exact = sum(val(x) * val(y) for x, y in zip(a, bb))
    assert val(g1('fma', a, bb)) == exact == Q(3, 2)
    assert val(g1('muladd', a, bb)) == exact
    # fma's single rounding exposes the product's rounding error; muladd cancels it
    x = fq(1 + P2(-12))
    assert val(g1('fma', [x, x], [x, x ^ 0x80000000])) == -P2(-24)
    assert g1('muladd', [x, x], [x, x ^ 0x80000000]) == 0
    # random: fma chain equals a Fraction-based re-implementation
    r = random.Random(5)
    for _ in range(200):
        k = r.randint(1, 20)
        a = [(r.getrandbits(1) << 31) | (r.randint(97, 157) << 23) | r.getrandbits(23) for _ in range(k)]
        bb = [(r.getrandbits(1) << 31) | (r.randint(97, 157) << 23) | r.getrandbits(23) for _ in range(k)]
        acc = 0
        for x, y in zip(a, bb):
            acc = E.rn_f32_fraction(val(acc) + val(x) * val(y))
        assert val(g1('fma', a, bb)) == val(acc)
        acc = 0
        for x, y in zip(a, bb):
            acc = E.rn_f32_fraction(val(acc) + val(E.rn_f32_fraction(val(x) * val(y))))
        assert val(g1('muladd', a, bb)) == val(acc)
    # signed zeros: fma(-0, 1, +0) = +0; underflow keeps the sign
    assert g1('fma', [0x80000000], [ONE]) == 0
    assert g1('fma', [fq(-P2(-100))], [fq(P2(-60))]) == 0x80000000
    assert g1('muladd', [fq(-P2(-100))], [fq(P2(-60))]) == 0  # RN(a*b) = -0, then +0 + -0 = +0
    # specials
    assert g1('fma', [0x7F800000, ONE], [0, ONE]) == E.F32_NAN
    assert g1('fma', [0x7F800000, 0xFF800000], [ONE, ONE]) == E.F32_NAN
    assert g1('fma', [0xFF800000, ONE], [ONE, ONE]) == 0xFF800000


def test_reductions():
    a = [b(1e8), ONE, b(-1e8), ONE]
    bb = [ONE] * 4
    assert val(g1('fma', a, bb)) == 1                                  # ((1e8+1)-1e8)+1
    assert val(g1('fma;split=4;reduce=serial', a, bb)) == 1
    assert val(g1('fma;split=4;reduce=pairwise', a, bb)) == 0          # (1e8+1) + (-1e8+1)
    assert val(g1('fma;lanes=4', a, bb)) == 2                          # (1e8-1e8) + (1+1)
    assert val(g1('fma;lanes=4;reduce=butterfly', a, bb)) == 2
    assert val(g1('fma;lanes=4;reduce=pairwise', a, bb)) == 0
    # butterfly over the parts of a split: (p0+p2) + (p1+p3), as over lanes
    assert val(g1('fma;split=4;reduce=butterfly', a, bb)) == 2
    assert val(g1('fma;split=4/interleave;ktile=1;reduce=butterfly', a, bb)) == 2
    assert val(g1('fma;split=2;reduce=butterfly', a, bb)) == val(g1('fma;split=2', a, bb))
    assert val(g1('fma;ktile=1;tile=fresh;reduce=pairwise', a, bb)) == 0
    assert val(g1('fma;split=2/interleave;ktile=1;reduce=serial', a, bb)) == 2  # parts {0,2}, {1,3}: 0 + 2
    # pairwise with an odd count: [p0+p1, p2+p3, p4] -> [(p0+p1)+(p2+p3), p4] -> ... + p4
    a5 = [b(1e8), ONE, ONE, ONE, b(-1e8)]
    assert val(E.reduce_parts([b(1e8), ONE, ONE, ONE, b(-1e8)], 'pairwise')) == 0
    assert val(E.reduce_parts([ONE, ONE, b(1e8), ONE, b(-1e8)], 'pairwise')) == 0
    assert val(E.reduce_parts([b(1e8), b(-1e8), ONE, ONE, ONE], 'pairwise')) == 3
    assert val(E.reduce_parts([b(1e8), b(-1e8), ONE, ONE, ONE], 'serial')) == 3
    assert val(E.reduce_parts([b(1e8), ONE, ONE, ONE, b(-1e8)], 'serial')) == 0
    del a5
    # butterfly uses the lane's own value on the left: check on 8 lanes that lane 0 is returned
    v = [b(float(1 << i)) for i in range(8)]
    assert val(E.reduce_parts(v, 'butterfly')) == 255


def test_parts():
    cfg = E.parse('fma;split=4')
    assert [p[0][0] for p in E.build_parts(cfg, 5)] == [[0, 1], [2, 3], [4], []]
    assert [p[0][0] for p in E.build_parts(cfg, 1)] == [[0], [], [], []]
    cfg = E.parse('fma;split=2/interleave;ktile=2')
    assert [p[0][0] for p in E.build_parts(cfg, 9)] == [[0, 1, 4, 5, 8], [2, 3, 6, 7]]
    cfg = E.parse('fma;split=2/interleave;ktile=2;tile=fresh')
    assert [p[0] for p in E.build_parts(cfg, 9)] == [[[0, 1], [4, 5], [8]], [[2, 3], [6, 7]]]
    cfg = E.parse('fma;split=2;ktile=2;tile=fresh')
    assert [p[0] for p in E.build_parts(cfg, 7)] == [[[0, 1], [2, 3]], [[4, 5], [6]]]
    cfg = E.parse('fma;ktile=3;tile=fresh')
    assert [p[0][0] for p in E.build_parts(cfg, 7)] == [[0, 1, 2], [3, 4, 5], [6]]
    cfg = E.parse('fma;lanes=4')
    assert [p[0][0] for p in E.build_parts(cfg, 6)] == [[0, 4], [1, 5], [2], [3]]
    # lanes cut into fresh k-tiles of 8 k (2 terms per lane and tile); an empty lane has no tile
    cfg = E.parse('fma;lanes=4;ktile=8;tile=fresh')
    assert [p[0] for p in E.build_parts(cfg, 18)] == [[[0, 4], [8, 12], [16]], [[1, 5], [9, 13], [17]],
                                                       [[2, 6], [10, 14]], [[3, 7], [11, 15]]]
    assert [p[0] for p in E.build_parts(cfg, 2)] == [[[0]], [[1]], [], []]
    # ktile with carry is a no-op
    r = random.Random(3)
    a = [(r.getrandbits(1) << 31) | (r.randint(100, 150) << 23) | r.getrandbits(23) for _ in range(40)]
    bb = [(r.getrandbits(1) << 31) | (r.randint(100, 150) << 23) | r.getrandbits(23) for _ in range(40)]
    assert g1('fma;ktile=7', a, bb) == g1('fma', a, bb)
    # fresh tiles combined serially == serial combination of per-tile fma chains
    t = [g1('fma', a[i:i + 7], bb[i:i + 7]) for i in range(0, 40, 7)]
    assert g1('fma;ktile=7;tile=fresh', a, bb) == E.reduce_parts(t, 'serial')
    assert g1('fma;ktile=7;tile=fresh;reduce=pairwise', a, bb) == E.reduce_parts(t, 'pairwise')
    # lanes with fresh k-tiles: per lane a serial sum of fresh fma chains over
    # its terms in each k-tile, then the lanes by reduce
    def lane_value(l, L, T):
        chains = []
        for t0 in range(0, 40, T):
            ks = [k for k in range(t0, min(40, t0 + T)) if k % L == l]
            chains.append(g1('fma', [a[k] for k in ks], [bb[k] for k in ks]))
        return E.reduce_parts(chains, 'serial')
    lanes = [lane_value(l, 4, 12) for l in range(4)]
    assert g1('fma;lanes=4;ktile=12;tile=fresh;reduce=serial', a, bb) == E.reduce_parts(lanes, 'serial')
    assert g1('fma;lanes=4;ktile=12;tile=fresh', a, bb) == E.reduce_parts(lanes, 'butterfly')
    # the tile boundary shows: lane 0 holds 2^25, 1 | -2^25, 1 (k = 0, 4 | 8, 12)
    a16 = [0] * 16
    a16[0], a16[4], a16[8], a16[12] = 0x4C000000, 0x3F800000, 0xCC000000, 0x3F800000
    ones = [0x3F800000] * 16
    assert val(g1('fma;lanes=4', a16, ones)) == 1                        # ((2^25 + 1) - 2^25) + 1
    assert val(g1('fma;lanes=4;ktile=8;tile=fresh', a16, ones)) == 0     # 2^25 + (-2^25 + 1)


def test_parser():
    c = E.parse(' hopper-bf16 ; split = 4 ; reduce=pairwise ')
    assert c['family'] == 'mma' and c['mma'] == {'k': 16, 'f': 25, 'out': 23, 'split': 'none', 'c': 'fused', 'in': 'bf16'}
    assert c['mma']['in'] == 'bf16' and c['split'] == 4 and c['reduce'] == 'pairwise'
    assert E.parse('mma(k=32,f=13)')['mma']['in'] == 'e4m3'
    assert E.parse('mma(k=16,f=25)')['mma']['in'] == 'bf16'
    assert E.parse('deepgemm-fp8')['promote'] == 128
    assert E.parse('blackwell-mxf8f6f4')['scale'] == 'fused'
    assert E.parse('fma;split=4/interleave;ktile=64')['interleave']
    # canonical form: presets spelled out, keys in table order, defaults and no-ops omitted
    for spec, canon in [('hopper-bf16', 'mma(k=16,f=25)'), (' fma ; split = 4 ', 'fma;split=4'),
                        ('fma;ktile=64;reduce=serial', 'fma'), ('fma;lanes=1;split=2', 'fma;split=2'),
                        ('deepgemm-fp8;split=2', 'mma(k=32,f=13,out=13);split=2;promote=128'),
                        ('mma(in=f16,c=late,k=8,f=25)', 'mma(k=8,f=25,c=late,in=f16)'),
                        ('fma;out=f16;split=2;ktile=3;tile=fresh', 'fma;ktile=3;tile=fresh;split=2;out=f16'),
                        ('fma;lanes=4;reduce=butterfly', 'fma;lanes=4'),
                        ('fma;lanes=16;ktile=512;tile=fresh;reduce=serial',
                         'fma;ktile=512;tile=fresh;lanes=16;reduce=serial')]:
        assert E.canonical(spec) == canon, (spec, E.canonical(spec))
        assert E.canonical(canon) == canon
    # rejected, with the reason class (the disputed spellings first)
    for bad, kind in [('fma;split=2/interleave', 'combination'), ('deepgemm-fp8;promote=64', 'repeat'),
                      ('deepgemm-fp8;promote=128', 'repeat'), ('fma;tile=fresh', 'combination'),
                      ('fma;lanes=1;reduce=butterfly', 'combination'), ('fma;split=+4', 'value'),
                      ('fma;split=\u0664', 'value'), ('fma;split=\u00b2', 'value'), ('fma;split=4294967296', 'value'),
                      ('mma(k=16,k=32,f=25)', 'repeat'), ('mma(k=16,,f=25)', 'syntax'), ('mma(k=16,f=0)', 'value'),
                      ('mma(k=16,f=61)', 'value'), ('mma(k=16,f=25,out=0)', 'value'), ('fma\x1c', 'unknown'),
                      ('', 'syntax'), ('fmaa', 'unknown'), ('fma;foo=1', 'unknown'), ('fma;split=0', 'value'),
                      ('fma;lanes=4;split=2', 'combination'), ('fma;reduce=butterfly', 'combination'),
                      ('fma;lanes=3;reduce=butterfly', 'combination'), ('fma;lanes=3', 'combination'),
                      ('fma;promote=32', 'combination'), ('hopper-bf16;promote=24', 'combination'),
                      ('mma(k=16)', 'missing'), ('mma(k=16,f=25,x=1)', 'unknown'),
                      ('mma(k=15,f=25,split=halves)', 'combination'), ('fma;tile=new', 'value'),
                      ('fma;out=f64', 'value'), ('fma;scale=fused', 'combination'),
                      ('hopper-fp8-wgmma;scale=block', 'combination'), ('fma;ktile=4;ktile=8', 'repeat'),
                      ('hopper-bf16;scale=fused', 'combination'), ('fma;lanes=4;ktile=2', 'combination'),
                      ('fma;lanes=4;ktile=6;tile=fresh', 'combination'),
                      ('fma;lanes=4;split=1/interleave;ktile=4;tile=fresh', 'combination')]:
        try:
            E.parse(bad)
        except E.OrderError as e:
            assert e.kind == kind and e.item in str(e), (bad, e.kind, str(e))
        else:
            raise AssertionError('accepted: ' + bad)


def test_vector_files_current():
    # the committed parse and edge vectors are what the reference gives now
    # (python3 reference/orders/gen_vectors.py --check also covers vectors.jsonl.gz)
    assert gen_vectors.check(['parse_vectors.jsonl', 'edge_vectors.jsonl']) == []


def test_foils_differ_from_the_contract():
    # each foil reading changes a result the contract fixes
    big = fq(P2(127))
    with E.foil('saturate'):
        assert g1('hopper-bf16', [big, big], [ONE, ONE]) == 0x7F7FFFFF
    assert g1('hopper-bf16', [big, big], [ONE, ONE]) == 0x7F800000
    tiny = fq((2 - P2(-7)) * P2(-76))
    with E.foil('zero-c-skip'):
        assert g1('hopper-bf16', [tiny] * 16, [fq(P2(-76))] * 16) != 0
    assert g1('hopper-bf16', [tiny] * 16, [fq(P2(-76))] * 16) == 0
    assert not E._active_foils


def test_promote():
    r = random.Random(7)
    codes = [c for c in range(256) if c & 0x7F != 0x7F]
    a = [E.f32_encode(E.e4m3_decode(r.choice(codes))) for _ in range(256)]
    bb = [E.f32_encode(E.e4m3_decode(r.choice(codes))) for _ in range(256)]
    p0 = g1('hopper-fp8-wgmma', a[:128], bb[:128])
    p1 = g1('hopper-fp8-wgmma', a[128:], bb[128:])
    assert g1('deepgemm-fp8', a, bb) == E.add_rn(E.add_rn(0, p0), p1)
    assert g1('hopper-fp8-wgmma;promote=128', a, bb) == g1('deepgemm-fp8', a, bb)


def test_mx():
    assert E.e4m3_decode(0x7E) == ('f', 0, 14, 5) and E.to_fraction(E.e4m3_decode(0x7E)) == 448
    assert E.e4m3_decode(0x7F) == ('n',) and E.e4m3_decode(0xFF) == ('n',)
    assert E.to_fraction(E.e4m3_decode(0x01)) == P2(-9)
    assert E.e5m2_decode(0x7C) == ('i', 0) and E.e5m2_decode(0xFD) == ('n',)
    assert E.to_fraction(E.e5m2_decode(0x7B)) == 57344
    assert E.to_fraction(E.e5m2_decode(0x01)) == P2(-16)
    r = random.Random(11)
    for fmt, dec, rc in (('mxfp8-e4m3', E.e4m3_decode, lambda: r.choice([c for c in range(256) if c & 0x7F != 0x7F])),
                         ('mxfp8-e5m2', E.e5m2_decode, lambda: r.choice([c for c in range(256) if (c >> 2) & 0x1F != 0x1F]))):
        for _ in range(10):
            k = 64
            ac = [rc() for _ in range(k)]
            bc = [rc() for _ in range(k)]
            asc = [r.randint(110, 140) for _ in range(2)]
            bsc = [r.randint(110, 140) for _ in range(2)]
            mx = dict(format=fmt, a_codes=ac, a_scales=asc, b_codes=bc, b_scales=bsc)
            # block: exact block dots, fma = RN(acc + term)
            terms = [sum(E.to_fraction(dec(ac[i])) * E.to_fraction(dec(bc[i])) for i in range(32 * j, 32 * j + 32))
                     * P2(asc[j] + bsc[j] - 254) for j in range(2)]
            t0 = E.rn_f32_fraction(terms[0])
            assert E.gemm('fma;scale=block', 1, 1, k, mx=mx)[0] == E.rn_f32_fraction(val(t0) + terms[1])
            assert E.gemm('muladd;scale=block', 1, 1, k, mx=mx)[0] == E.rn_f32_fraction(
                val(t0) + val(E.rn_f32_fraction(terms[1])))
            # dequant == fma on the dequantised f32 values
            a32 = [E.rn_f32_fraction(E.to_fraction(dec(ac[i])) * P2(asc[i // 32] - 127)) for i in range(k)]
            b32 = [E.rn_f32_fraction(E.to_fraction(dec(bc[i])) * P2(bsc[i // 32] - 127)) for i in range(k)]
            assert E.gemm('fma;scale=dequant', 1, 1, k, mx=mx)[0] == g1('fma', a32, b32)
            if fmt == 'mxfp8-e4m3':
                # fused with a single block: every product shifted by the same 2^(Xa+Xb), no range issue
                v = [E.f32_encode(dec(c)) for c in ac[:32]]
                w = [E.f32_encode(dec(c)) for c in bc[:32]]
                mx1 = dict(format=fmt, a_codes=ac[:32], a_scales=asc[:1], b_codes=bc[:32], b_scales=bsc[:1])
                got = E.gemm('blackwell-mxf8f6f4', 1, 1, 32, mx=mx1)[0]
                ref = g1('mma(k=32,f=25,in=e4m3)', v, w)
                assert val(got) == val(ref) * P2(asc[0] + bsc[0] - 254)
                # scale=block + promote=32 on Hopper: fma(2^(Xa+Xb), p_block, final)
                got = E.gemm('hopper-fp8-wgmma;scale=block;promote=32', 1, 1, k, mx=mx)[0]
                p = [g1('hopper-fp8-wgmma', [E.f32_encode(dec(c)) for c in ac[32 * j:32 * j + 32]],
                        [E.f32_encode(dec(c)) for c in bc[32 * j:32 * j + 32]]) for j in range(2)]
                s = [E.pow2_f32(asc[j] + bsc[j] - 254) for j in range(2)]
                assert got == E.fma_rn(s[1], p[1], E.fma_rn(s[0], p[0], 0))
    # NaN scale
    mx = dict(format='mxfp8-e4m3', a_codes=[0x38] * 32, a_scales=[0xFF], b_codes=[0x38] * 32, b_scales=[127])
    assert E.is_nan32(E.gemm('fma;scale=block', 1, 1, 32, mx=mx)[0])
    assert E.is_nan32(E.gemm('fma;scale=dequant', 1, 1, 32, mx=mx)[0])
    assert E.gemm('blackwell-mxf8f6f4', 1, 1, 32, mx=mx)[0] == E.TC_NAN
    # K not a multiple of 32
    try:
        E.gemm('fma;scale=block', 1, 1, 16, mx=dict(format='mxfp8-e4m3', a_codes=[0] * 16, a_scales=[],
                                                   b_codes=[0] * 16, b_scales=[]))
    except E.OrderError:
        pass
    else:
        raise AssertionError('K=16 accepted')


def _frac_fused(prods, c, F, O, emin_in):
    """Second, Fraction-only model of the fused sum (finite inputs), for cross-checking."""
    def dec(x, emin):
        if x == 0:
            return Q(0), emin
        e = 0
        ax = abs(x)
        while ax >= 2 * P2(e):
            e += 1
        while ax < P2(e):
            e -= 1
        e = max(e, emin)
        return x / P2(e), e
    terms = []
    for a, bb, xs in prods:
        sa, ea = dec(a, emin_in)
        sb, eb = dec(bb, emin_in)
        terms.append((sa * sb, ea + eb + xs))
    terms = [t for t in terms if t[0] != 0]  # zero products take no part in M
    terms.append(dec(c, -126))
    M = max(e for _, e in terms)
    S = 0
    for s, e in terms:
        t = abs(s) * P2(F + e - M)
        t = t.numerator // t.denominator
        S += t if s >= 0 else -t
    x = S * P2(M - F)
    if x == 0:
        return Q(0)
    ax = abs(x)
    e = 0
    while ax >= 2 * P2(e):
        e += 1
    while ax < P2(e):
        e -= 1
    if e >= 128:
        return 'inf' if x > 0 else '-inf'
    q = P2(max(e, -126) - O)
    r = (ax / q).numerator // (ax / q).denominator * q
    return r if x > 0 else -r


def test_fused_sum_vs_fraction_model():
    r = random.Random(9)
    for T, p, emin, lo, hi in (('bf16', 8, -126, -140, 40), ('f16', 11, -14, -24, 15), ('e4m3', 4, -6, -9, 8)):
        for _ in range(300):
            F, O = r.choice([(25, 23), (13, 13), (24, 23), (25, 13)])
            n = r.randint(1, 16)
            vals = []
            for _ in range(2 * n):
                v = E.round_dyadic(r.getrandbits(1), r.getrandbits(p) | 1, r.randint(lo, hi) - p, p, emin, 1000, 'RN')
                if T == 'e4m3' and E.to_fraction(v) > 448:
                    v = ('f', v[1], 7, 6)
                if r.random() < 0.1:
                    v = ('f', v[1], 0, 0)
                vals.append(v)
            xs = [r.randint(-20, 20) if r.random() < 0.3 else 0 for _ in range(n)]
            cbits = r.choice([0, E.rn_f32_fraction(Q(r.getrandbits(30), 1 + r.getrandbits(20)) * P2(r.randint(-140, 60)))])
            if O == 13 and cbits:
                cbits = E.f32_encode(E.round_dyadic(0, *E.f32_decode(cbits)[2:], 14, -126, 127, 'RZ'))
            prods = [(vals[2 * i], vals[2 * i + 1], xs[i], False) for i in range(n)]
            got = val(E.fused_sum(prods, cbits, F, O, emin))
            want = _frac_fused([(E.to_fraction(vals[2 * i]), E.to_fraction(vals[2 * i + 1]), xs[i]) for i in range(n)],
                               val(cbits), F, O, emin)
            assert got == want, (T, F, O)


if __name__ == '__main__':
    n = 0
    for name, fn in sorted(globals().items()):
        if name.startswith('test_') and callable(fn):
            fn()
            n += 1
            print('ok', name)
    print(f'{n} tests passed')
