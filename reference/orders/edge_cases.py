"""Hand-built value vectors for the edges of the tensor-core fused sum
(docs/ORDERS.md, "The fused sum"): finite products whose sum reaches 2^128
(Inf), the boundary where the round-toward-zero result is the largest finite
value and just beyond it, zero products beside a non-zero C, and a zero C
taking part in the alignment at -126.

Each case names what it shows (``what``) and, where one applies, the foil
(exact_orders.FOILS) it tells apart from the contract: ``foil_c`` is what the
foil would give, and ``cases()`` asserts that it differs from ``c``. The
claims of each ``what`` are asserted here and again by tests/orders_reference.rs.
Standard library only.
"""

from fractions import Fraction as Q

import exact_orders as E

P2 = lambda e: Q(2) ** e  # noqa: E731
MAX = {23: 0x7F7FFFFF, 13: 0x7F7FFC00}  # (2 - 2^-O) * 2^127 for O = 23, 13
INF = 0x7F800000

# what -> the claim checked on every case of that kind
WHATS = {
    'overflow-inf': 'finite inputs; the fused sum reaches 2^128: Inf of its sign',
    'overflow-via-c': 'finite inputs; C (a previous step) plus the products reaches 2^128: Inf',
    'truncated-to-inf': 'finite inputs; the exact value is below 2^128 but the sum of the truncated terms is 2^128: Inf',
    'rz-max': 'the fused sum is exactly the largest finite value (2 - 2^-O) * 2^127',
    'beyond-max': 'the fused sum lies strictly between the largest finite value and 2^128: RZ keeps it finite',
    'rn-contrast': 'the inputs of a beyond-max case under an IEEE (RN) order: Inf',
    'cancel-huge': 'products beyond 2^128 that cancel in the fused sum: finite',
    'zero-products': 'zero products (a zero factor beside a large one) beside a non-zero C: C is not truncated',
    'zero-c': 'a zero C takes part in the alignment at -126 and truncates products below 2^(-126-F)',
}


def f(q):
    """f32 bits of an exact rational that must be an f32."""
    bits = E.rn_f32_fraction(Q(q))
    assert E.value_to_fraction_or_special(bits) == Q(q), q
    return bits


def e4m3(q):
    """E4M3 code of an exact rational that must be an e4m3 value."""
    for c in range(256):
        v = E.e4m3_decode(c)
        if v[0] == 'f' and E.to_fraction(v) == Q(q) and (c >> 7) == (q < 0):
            return c
    raise AssertionError(f'{q} is not an e4m3 value')


def _plain(what, note, order, a, b, k=None, foil=None):
    k = k or len(a)
    a = a + [0] * (k - len(a))
    b = b + [0] * (k - len(b))
    return dict(what=what, note=note, order=order, m=1, n=1, k=k, a=a, b=b, foil=foil)


def _mx(what, note, order, blocks, foil=None):
    """blocks: [(a values, b values, Xa, Xb)] with unbiased scale exponents;
    each block is padded with zero codes to 32."""
    ac, bc, asc, bsc = [], [], [], []
    for av, bv, xa, xb in blocks:
        ac += [e4m3(x) for x in av] + [0] * (32 - len(av))
        bc += [e4m3(x) for x in bv] + [0] * (32 - len(bv))
        asc.append(127 + xa)
        bsc.append(127 + xb)
    return dict(what=what, note=note, order=order, m=1, n=1, k=len(ac), format='mxfp8-e4m3',
                a_codes=ac, a_scales=asc, b_codes=bc, b_scales=bsc, foil=foil)


def _bf16_max_parts(e):
    """Three bf16 values summing to (2 - 2^-23) * 2^e (each 8 significant bits)."""
    g = 2 - P2(-7)
    return [g * P2(e), g * P2(e - 8), g * P2(e - 16)]


def _raw():
    out = []
    hb = 'hopper-bf16'
    big = P2(127)
    # ---- hopper-bf16 (F=25, O=23): quantum 2^102 when M = 127
    out.append(_plain('overflow-inf', '2^127 + 2^127 = 2^128', hb, [f(big), f(big)], [f(1), f(1)], foil='saturate'))
    out.append(_plain('overflow-inf', '-2^127 - 2^127 = -2^128', hb, [f(-big), f(-big)], [f(1), f(1)], foil='saturate'))
    out.append(_plain('overflow-inf', 'one product 2^127 * 2 = 2^128', hb, [f(big)], [f(2)], foil='saturate'))
    mx = _bf16_max_parts(127)
    out.append(_plain('rz-max', 'three bf16 products summing to f32 MAX', hb, [f(x) for x in mx], [f(1)] * 3))
    out.append(_plain('overflow-inf', 'MAX + 2^104 = 2^128', hb, [f(x) for x in mx] + [f(P2(104))], [f(1)] * 4,
                      foil='saturate'))
    for extra, note in ((P2(102), 'MAX + 2^102 (one quantum)'), (P2(103), 'MAX + 2^103 (half an ulp of MAX)'),
                        (P2(103) + P2(102), '2^128 - 2^102 (the largest sum below 2^128)')):
        out.append(_plain('beyond-max', note, hb, [f(x) for x in mx] + [f(extra)], [f(1)] * 4))
        out.append(_plain('beyond-max', '-(' + note + ')', hb, [f(-x) for x in mx] + [f(-extra)], [f(1)] * 4))
    for order in ('fma', 'muladd'):
        out.append(_plain('rn-contrast', 'MAX + 2^103 rounds to nearest (even): Inf', order,
                          [f(x) for x in mx] + [f(P2(103))], [f(1)] * 4))
    out.append(_plain('truncated-to-inf', '2^127 + 2^127 - 14 * (2^102 - 2^94): each negative term truncates to 0',
                      hb, [f(big), f(big)] + [f(-(2 - P2(-7)) * P2(101))] * 14, [f(1)] * 16, foil='saturate'))
    out.append(_plain('overflow-via-c', 'step 1 gives C = MAX, step 2 adds 2^104; step 3 keeps Inf', hb,
                      [f(x) for x in mx] + [0] * 13 + [f(P2(104))] + [0] * 15 + [f(1)] * 16,
                      [f(1)] * 3 + [0] * 13 + [f(1)] * 32, foil='saturate'))
    out.append(_plain('cancel-huge', '2^129 - (2^129 - 2^121): products beyond f32 cancel exactly', hb,
                      [f(big), f(-(2 - P2(-7)) * P2(126))], [f(4), f(4)]))
    out.append(_plain('rn-contrast', 'the same under fma: RN(2^129) is Inf', 'fma',
                      [f(big), f(-(2 - P2(-7)) * P2(126))], [f(4), f(4)]))
    c = _bf16_max_parts(-10)  # C = (2 - 2^-23) * 2^-10
    out.append(_plain('zero-products', 'C = (2-2^-23)*2^-10 from step 1; step 2: 2^127 * 0 (nominal e = 1)', hb,
                      [f(x) for x in c] + [0] * 13 + [f(big)] + [0] * 15, [f(1)] * 3 + [0] * 29, foil='zeros-align'))
    out.append(_plain('zero-products', 'as above, with a small non-zero product 2^-20 beside the zero ones', hb,
                      [f(x) for x in c] + [0] * 13 + [f(big), f(P2(-20))] + [0] * 14,
                      [f(1)] * 3 + [0] * 13 + [0, f(1)] + [0] * 14, foil='zeros-align'))
    tiny = f((2 - P2(-7)) * P2(-76))
    out.append(_plain('zero-c', '16 products (2-2^-7)*2^-152 with C = +0: M = -126 truncates each to 0', hb,
                      [tiny] * 16, [f(P2(-76))] * 16, foil='zero-c-skip'))
    # ---- ampere-bf16 (F=24, halves): quantum 2^103 when M = 127
    ab = 'ampere-bf16'
    out.append(_plain('overflow-inf', '2^127 + 2^127 = 2^128 (first half)', ab, [f(big), f(big)], [f(1), f(1)],
                      foil='saturate'))
    out.append(_plain('rz-max', 'f32 MAX', ab, [f(x) for x in mx], [f(1)] * 3))
    out.append(_plain('beyond-max', 'MAX + 2^103 (one quantum at F=24)', ab, [f(x) for x in mx] + [f(P2(103))],
                      [f(1)] * 4))
    out.append(_plain('overflow-via-c', 'MAX from the first half, 2^104 in the second half', ab,
                      [f(x) for x in mx] + [0] * 5 + [f(P2(104))], [f(1)] * 3 + [0] * 5 + [f(1)], foil='saturate'))
    # ---- in=f32 (any f32 input)
    f32o = 'mma(k=16,f=25,in=f32)'
    fmax = E.value_to_fraction_or_special(MAX[23])
    out.append(_plain('overflow-inf', 'MAX + MAX', f32o, [MAX[23], MAX[23]], [f(1), f(1)], foil='saturate'))
    out.append(_plain('rz-max', 'MAX * 1', f32o, [MAX[23]], [f(1)]))
    out.append(_plain('beyond-max', 'MAX + 2^103', f32o, [MAX[23], f(P2(103))], [f(1), f(1)]))
    out.append(_plain('overflow-inf', 'MAX + 2^104', f32o, [MAX[23], f(P2(104))], [f(1), f(1)], foil='saturate'))
    out.append(_plain('rn-contrast', 'MAX + 2^103 under fma', 'fma', [MAX[23], f(P2(103))], [f(1), f(1)]))
    assert fmax == (2 - P2(-23)) * P2(127)
    # ---- hopper-f16: zero products beside C (f16 zero at -14, 65504 * 0 has e = 1)
    c16 = [(2 - P2(-10)) * P2(-5), (2 - P2(-10)) * P2(-10), Q(3, 2) * P2(-16)]
    w16 = [P2(-5), P2(-11), P2(-16)]
    out.append(_plain('zero-products', 'C = (2-2^-23)*2^-10 from step 1; step 2: 65504 * 0 (nominal e = 1)',
                      'hopper-f16', [f(x) for x in c16] + [0] * 13 + [f(65504)] + [0] * 15,
                      [f(x) for x in w16] + [0] * 29, foil='zeros-align'))
    # ---- hopper-fp8-wgmma (F=13, O=13, e4m3): 448 * 0 has e = 8 - 6 = 2
    c8 = [Q(15, 8) * P2(-1), Q(15, 8) * P2(-5), Q(15, 8) * P2(-5), Q(3, 2) * P2(-7)]
    w8 = [Q(1), Q(1), P2(-4), P2(-6)]
    out.append(_plain('zero-products', 'C = 1 - 2^-14 (14 bits) from step 1; step 2: 448 * 0 (nominal e = 2)',
                      'hopper-fp8-wgmma', [f(x) for x in c8] + [0] * 28 + [f(448)] + [0] * 31,
                      [f(x) for x in w8] + [0] * 60, foil='zeros-align'))
    # ---- MX scale=fused (blackwell-mxf8f6f4: F=25, O=23): scales reach 2^128
    bw = 'blackwell-mxf8f6f4'
    out.append(_mx('overflow-inf', '32 products 1 * 1 * 2^123 = 2^128', bw, [([1] * 32, [1] * 32, 62, 61)],
                   foil='saturate'))
    out.append(_mx('overflow-inf', '-32 * 2^123 = -2^128', bw, [([-1] * 32, [1] * 32, 62, 61)], foil='saturate'))
    out.append(_mx('rz-max', '(16*16 - 2^-8*2^-8) * 2^120 = MAX', bw, [([16, -P2(-8)], [16, P2(-8)], 60, 60)]))
    out.append(_mx('beyond-max', '(16*16 - 2^-9*2^-8) * 2^120 = 2^128 - 2^103', bw,
                   [([16, -P2(-9)], [16, P2(-8)], 60, 60)]))
    out.append(_mx('truncated-to-inf', '(16*16 - 2^-9*2^-9) * 2^120: the negative term truncates to 0', bw,
                   [([16, -P2(-9)], [16, P2(-9)], 60, 60)], foil='saturate'))
    out.append(_mx('overflow-via-c', 'block 0 gives C = MAX, block 1 adds 2^104', bw,
                   [([16, -P2(-8)], [16, P2(-8)], 60, 60), ([1], [1], 52, 52)], foil='saturate'))
    out.append(_mx('zero-products', 'block 0 gives C = 1 - 2^-14; block 1: zero a codes beside b = 448, Xa = 100',
                   bw, [(c8, w8, 0, 0), ([0, 0], [448, 1], 100, 0)], foil='zeros-align'))
    out.append(_mx('zero-c', '32 products 1 * 1 * 2^-152 with C = +0: M = -126 truncates each to 0', bw,
                   [([1] * 32, [1] * 32, -76, -76)], foil='zero-c-skip'))
    # ---- MX scale=fused with F=13, O=13: the e8m13 maximum (2 - 2^-13) * 2^127
    w13 = 'mma(k=32,f=13,out=13);scale=fused'
    out.append(_mx('rz-max', '(8*16 + 8*16 - 2^-3*2^-3) * 2^120 = (2-2^-13)*2^127', w13,
                   [([8, 8, -P2(-3)], [16, 16, P2(-3)], 60, 60)]))
    out.append(_mx('overflow-inf', '(8*16 + 8*16) * 2^120 = 2^128', w13, [([8, 8], [16, 16], 60, 60)],
                   foil='saturate'))
    out.append(_mx('truncated-to-inf', '(8*16 + 8*16 - 2^-9*2^-9) * 2^120: the negative term truncates to 0', w13,
                   [([8, 8, -P2(-9)], [16, 16, P2(-9)], 60, 60)], foil='saturate'))
    out.append(_mx('zero-products', 'block 0 gives C = 1 - 2^-14; block 1: zero a codes beside b = 448, Xa = 100',
                   w13, [(c8, w8, 0, 0), ([0, 0], [448, 1], 100, 0)], foil='zeros-align'))
    return out


def _run(case):
    if 'format' in case:
        mx = {k: case[k] for k in ('format', 'a_codes', 'a_scales', 'b_codes', 'b_scales')}
        return E.gemm(case['order'], case['m'], case['n'], case['k'], mx=mx)
    return E.gemm(case['order'], case['m'], case['n'], case['k'], a=case['a'], b=case['b'])


def _finite_inputs(case):
    if 'format' in case:
        ok = all(E.e4m3_decode(x)[0] == 'f' for x in case['a_codes'] + case['b_codes'])
        return ok and 0xFF not in case['a_scales'] + case['b_scales']
    return all(E.f32_decode(x)[0] == 'f' for x in case['a'] + case['b'])


def check_claim(case):
    """Assert what the case's `what` says about its output (also in Rust)."""
    what, c = case['what'], case['c']
    o = E.parse(case['order'])
    out_bits = o['mma']['out'] if o['family'] == 'mma' else 23
    mags = {x & 0x7FFFFFFF for x in c}
    if what in ('overflow-inf', 'overflow-via-c', 'truncated-to-inf', 'rn-contrast'):
        assert _finite_inputs(case) and mags == {INF}, case
    elif what in ('rz-max', 'beyond-max'):
        assert mags == {MAX[out_bits]}, case
    elif what == 'cancel-huge':
        assert all(E.f32_decode(x)[0] == 'f' for x in c), case
    elif what == 'zero-c':
        assert c == [0] * len(c), case
    elif what == 'zero-products':
        assert all(E.f32_decode(x)[0] == 'f' and x & 0x7FFFFFFF for x in c), case
    else:
        raise AssertionError(what)


def cases():
    """The edge cases with their results (c) and foil results (foil_c)."""
    out = []
    for case in _raw():
        assert case['what'] in WHATS, case['what']
        case['c'] = _run(case)
        if case['foil'] is not None:
            with E.foil(case['foil']):
                case['foil_c'] = _run(case)
            assert case['foil_c'] != case['c'], ('foil does not differ', case['note'], case['order'])
        else:
            case['foil_c'] = None
        check_claim(case)
        out.append(case)
    return out
