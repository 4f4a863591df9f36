"""Exact-arithmetic reference for docs/ORDERS.md (accumulation orders).

Independent of the Rust code: written from docs/ORDERS.md only. Pure Python,
standard library only. Every value is exact: a finite value is a dyadic
rational kept as Python integers ``(neg, mag, exp)`` meaning
``(-1)^neg * mag * 2^exp``; ``fractions.Fraction`` is offered for
convenience at the edges (``to_fraction`` / ``rn_f32_fraction``). No float
arithmetic is used anywhere; ``struct`` is only used for bit conversions of
literals in the tests.

Value tuples:
    ('f', neg, mag, exp)   finite (mag == 0 is a zero with sign ``neg``)
    ('i', neg)             infinity
    ('n',)                 NaN

Public entry points:
    parse(spec) -> config dict
    gemm(spec, m, n, k, a=..., b=...)                      plain f32 inputs (bit patterns)
    gemm(spec, m, n, k, mx={format, a_codes, a_scales, b_codes, b_scales})
both return the M x N result as a row-major list of f32 bit patterns (ints).
"""

from fractions import Fraction
import contextlib

F32_NAN = 0x7FC00000  # NaN produced by IEEE operations (fma, add, mul) and conversions
TC_NAN = 0x7FFFFFFF   # NaN produced by a fused sum (ORDERS.md "Specials")


class OrderError(ValueError):
    """A rejected spelling (``kind``: one of KINDS, ``item``: the text the
    message names) or input the order cannot run on (``kind`` 'input')."""
    kind = 'input'
    item = ''


# ---------------------------------------------------------------------------
# Number formats
# ---------------------------------------------------------------------------

# p: significant bits (incl. hidden), emin, emax: exponent range of normals,
# maxmag: largest finite magnitude as (mag, exp), inf: has infinities.
TYPES = {
    'f32': dict(p=24, emin=-126, emax=127, inf=True),
    'bf16': dict(p=8, emin=-126, emax=127, inf=True),
    'f16': dict(p=11, emin=-14, emax=15, inf=True),
    'e4m3': dict(p=4, emin=-6, emax=8, inf=False, maxmag=(7 * 2**6, 0)),  # 448
    'e5m2': dict(p=3, emin=-14, emax=15, inf=True),
}


def round_dyadic(neg, mag, exp, p, emin, emax, mode):
    """Round (-1)^neg * mag * 2^exp to p significant bits, normal exponents in
    [emin, emax], subnormals quantised at 2^(emin-p+1). mode 'RN' (nearest
    even; overflow -> Inf) or 'RZ' (toward zero; overflow -> largest finite).
    Returns a value tuple."""
    if mag == 0:
        return ('f', neg, 0, 0)
    E = exp + mag.bit_length() - 1
    q = max(E, emin) - (p - 1)
    if exp >= q:
        m, e = mag << (exp - q), q
    else:
        sh = q - exp
        m = mag >> sh
        if mode == 'RN':
            rem = mag & ((1 << sh) - 1)
            half = 1 << (sh - 1)
            if rem > half or (rem == half and (m & 1)):
                m += 1
        elif mode != 'RZ':
            raise ValueError(mode)
        e = q
    if m == (1 << p):
        m >>= 1
        e += 1
    if m and e + m.bit_length() - 1 > emax:
        if mode == 'RN':
            return ('i', neg)
        return ('f', neg, (1 << p) - 1, emax - p + 1)
    return ('f', neg, m, e)


def _encode(v, ebits, mbits, nan_bits):
    """Encode a value exactly representable in the IEEE-like binary format."""
    bias = (1 << (ebits - 1)) - 1
    sign_shift = ebits + mbits
    if v[0] == 'n':
        return nan_bits
    neg = v[1]
    s = (1 << sign_shift) if neg else 0
    if v[0] == 'i':
        return s | (((1 << ebits) - 1) << mbits)
    _, _, m, q = v
    if m == 0:
        return s
    emin = 1 - bias
    L = m.bit_length()
    E = q + L - 1
    if E < emin:
        sh = q - (emin - mbits)
        assert sh >= 0, 'not representable (below subnormal quantum)'
        return s | (m << sh)
    sh = mbits - (L - 1)
    if sh >= 0:
        full = m << sh
    else:
        assert m & ((1 << -sh) - 1) == 0, 'not representable (too many bits)'
        full = m >> -sh
    assert E + bias < (1 << ebits) - 1, 'not representable (overflow)'
    return s | ((E + bias) << mbits) | (full - (1 << mbits))


def _decode(bits, ebits, mbits):
    bias = (1 << (ebits - 1)) - 1
    neg = (bits >> (ebits + mbits)) & 1
    e = (bits >> mbits) & ((1 << ebits) - 1)
    f = bits & ((1 << mbits) - 1)
    if e == (1 << ebits) - 1:
        return ('n',) if f else ('i', neg)
    if e == 0:
        return ('f', neg, f, 1 - bias - mbits)
    return ('f', neg, f | (1 << mbits), e - bias - mbits)


def f32_decode(bits):
    return _decode(bits & 0xFFFFFFFF, 8, 23)


def f32_encode(v, nan_bits=F32_NAN):
    return _encode(v, 8, 23, nan_bits)


def is_nan32(bits):
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x007FFFFF) != 0


def rn_f32(neg, mag, exp):
    """RN-to-f32 of an exact dyadic (nearest-even, subnormals, overflow -> Inf)."""
    return f32_encode(round_dyadic(neg, mag, exp, 24, -126, 127, 'RN'))


def to_fraction(v):
    if v[0] != 'f':
        raise ValueError('not finite')
    x = Fraction(v[2]) * (Fraction(2) ** v[3])
    return -x if v[1] else x


def rn_f32_fraction(x, neg_zero=False):
    """RN-to-f32 of an exact rational (any Fraction, not only dyadic)."""
    x = Fraction(x)
    if x == 0:
        return 0x80000000 if neg_zero else 0
    neg = x < 0
    x = abs(x)
    # scale so that the integer part has plenty of bits, keep a sticky bit
    E = x.numerator.bit_length() - x.denominator.bit_length()
    sh = 60 - E  # x * 2^sh has ~60 integer bits
    num = x.numerator << sh if sh >= 0 else x.numerator
    den = x.denominator if sh >= 0 else x.denominator << (-sh)
    qt, r = divmod(num, den)
    mag = (qt << 1) | (1 if r else 0)  # sticky bit below the last kept bit
    return rn_f32(neg, mag, -sh - 1)


def value_to_fraction_or_special(bits):
    v = f32_decode(bits)
    return to_fraction(v) if v[0] == 'f' else v


# ---------------------------------------------------------------------------
# IEEE f32 operations (RN)
# ---------------------------------------------------------------------------

def _prop_nan(*ops):
    for b in ops:
        if is_nan32(b):
            return b | 0x00400000  # first NaN operand, quieted
    return None


def _exact_sum(vals):
    """Exact sum of finite value tuples -> (neg, mag, exp) with IEEE zero sign
    rule for RN: an exact zero is -0 only if every term is a -0."""
    e = min((v[3] for v in vals if v[2]), default=0)
    tot = 0
    for v in vals:
        if v[2]:
            t = v[2] << (v[3] - e)
            tot += -t if v[1] else t
    if tot == 0:
        neg = all(v[2] == 0 and v[1] for v in vals)
        return neg, 0, 0
    return tot < 0, abs(tot), e


def _sum_rn(vals):
    neg, mag, e = _exact_sum(vals)
    if mag == 0:
        return 0x80000000 if neg else 0
    return rn_f32(neg, mag, e)


def _add_specials(vals):
    """vals: value tuples, no NaN among them. Returns bits for an Inf/NaN
    result or None if all finite."""
    infs = [v for v in vals if v[0] == 'i']
    if not infs:
        return None
    if len({v[1] for v in infs}) > 1:
        return F32_NAN
    return f32_encode(infs[0])


def add_rn(x, y):
    """RN(x + y) on f32 bit patterns."""
    n = _prop_nan(x, y)
    if n is not None:
        return n
    vx, vy = f32_decode(x), f32_decode(y)
    sp = _add_specials([vx, vy])
    if sp is not None:
        return sp
    return _sum_rn([vx, vy])


def _mul_exact(va, vb):
    """Exact product of two non-NaN value tuples; None for Inf * 0 (invalid)."""
    neg = va[1] ^ vb[1]
    if va[0] == 'i' or vb[0] == 'i':
        other = vb if va[0] == 'i' else va
        if other[0] == 'f' and other[2] == 0:
            return None
        return ('i', neg)
    return ('f', neg, va[2] * vb[2], va[3] + vb[3])


def mul_rn(a, b):
    """RN(a * b)."""
    n = _prop_nan(a, b)
    if n is not None:
        return n
    p = _mul_exact(f32_decode(a), f32_decode(b))
    if p is None:
        return F32_NAN
    if p[0] == 'i':
        return f32_encode(p)
    if p[2] == 0:
        return 0x80000000 if p[1] else 0
    return rn_f32(p[1], p[2], p[3])


def fma_rn(a, b, c):
    """RN(a*b + c), a single rounding."""
    n = _prop_nan(a, b, c)
    if n is not None:
        return n
    p = _mul_exact(f32_decode(a), f32_decode(b))
    if p is None:
        return F32_NAN
    vc = f32_decode(c)
    sp = _add_specials([p, vc])
    if sp is not None:
        return sp
    return _sum_rn([p, vc])


def add_value_rn(acc, term):
    """RN(acc + term): acc f32 bits, term an exact value tuple (one rounding)."""
    n = _prop_nan(acc)
    if n is not None:
        return n
    if term[0] == 'n':
        return F32_NAN
    va = f32_decode(acc)
    sp = _add_specials([va, term])
    if sp is not None:
        return sp
    return _sum_rn([va, term])


def value_rn(term):
    """RN(term) of an exact value tuple -> f32 bits."""
    if term[0] == 'n':
        return F32_NAN
    if term[0] == 'i':
        return f32_encode(term)
    if term[2] == 0:
        return 0x80000000 if term[1] else 0
    return rn_f32(term[1], term[2], term[3])


# ---------------------------------------------------------------------------
# Output conversion (RNE), widened back to f32
# ---------------------------------------------------------------------------

def f32_to_bf16_widened(bits):
    v = f32_decode(bits)
    if v[0] == 'n':
        return 0x7FC00000 | (bits & 0x80000000)   # 0x7FC0 with sign
    if v[0] == 'i' or v[2] == 0:
        return bits
    r = round_dyadic(v[1], v[2], v[3], 8, -126, 127, 'RN')
    return _encode(r, 8, 7, None) << 16


def f32_to_f16_widened(bits):
    v = f32_decode(bits)
    if v[0] == 'n':
        return 0x7FC00000 | (bits & 0x80000000)   # canonical quiet NaN with sign
    if v[0] == 'i' or v[2] == 0:
        return bits
    r = round_dyadic(v[1], v[2], v[3], 11, -14, 15, 'RN')
    h = _encode(r, 5, 10, None)
    return f32_encode(_decode(h, 5, 10))


# ---------------------------------------------------------------------------
# Input types: representability and decomposition
# ---------------------------------------------------------------------------

def representable(v, T):
    t = TYPES[T]
    if v[0] == 'n':
        return True
    if v[0] == 'i':
        return t['inf']
    if v[2] == 0:
        return True
    r = round_dyadic(v[1], v[2], v[3], t['p'], t['emin'], t['emax'], 'RN')
    if r[0] != 'f' or Fraction(r[2]) * Fraction(2) ** r[3] != Fraction(v[2]) * Fraction(2) ** v[3]:
        return False
    if 'maxmag' in t:
        mm, me = t['maxmag']
        if Fraction(v[2]) * Fraction(2) ** v[3] > Fraction(mm) * Fraction(2) ** me:
            return False
    return True


def decompose(v, emin):
    """x = sx * 2^ex with sx in [1,2) for normals; zero/subnormal: ex = emin.
    Returns (neg, smag, sexp, ex) with sx = smag * 2^sexp."""
    _, neg, mag, exp = v
    if mag == 0:
        return neg, 0, 0, emin
    E = exp + mag.bit_length() - 1
    ex = max(E, emin)
    return neg, mag, exp - ex, ex


# ---------------------------------------------------------------------------
# MX element formats and E8M0 scales
# ---------------------------------------------------------------------------

def e4m3_decode(c):
    neg = (c >> 7) & 1
    e = (c >> 3) & 0xF
    m = c & 7
    if e == 15 and m == 7:
        return ('n',)
    if e == 0:
        return ('f', neg, m, -9)
    return ('f', neg, 8 | m, e - 7 - 3)


def e5m2_decode(c):
    neg = (c >> 7) & 1
    e = (c >> 2) & 0x1F
    m = c & 3
    if e == 31:
        return ('i', neg) if m == 0 else ('n',)
    if e == 0:
        return ('f', neg, m, -16)
    return ('f', neg, 4 | m, e - 15 - 2)


MX_FORMATS = {'mxfp8-e4m3': ('e4m3', e4m3_decode), 'mxfp8-e5m2': ('e5m2', e5m2_decode)}
MX_BLOCK = 32


def block_dot(acodes, sa, bcodes, sb, dec):
    """Exact X_a * X_b * sum a_i b_i as a value tuple (mx::block_dot).
    A zero sum is +0."""
    if sa == 0xFF or sb == 0xFF:
        return ('n',)
    pos_inf = neg_inf = nan = False
    terms = []
    for x, y in zip(acodes, bcodes):
        p = _mul_exact_mx(dec(x), dec(y))
        if p[0] == 'n':
            nan = True
        elif p[0] == 'i':
            if p[1]:
                neg_inf = True
            else:
                pos_inf = True
        else:
            terms.append(p)
    if nan or (pos_inf and neg_inf):
        return ('n',)
    if pos_inf or neg_inf:
        return ('i', neg_inf)
    neg, mag, e = _exact_sum(terms)
    if mag == 0:
        return ('f', False, 0, 0)
    return ('f', neg, mag, e + (sa - 127) + (sb - 127))


def _mul_exact_mx(va, vb):
    if va[0] == 'n' or vb[0] == 'n':
        return ('n',)
    p = _mul_exact(va, vb)
    return ('n',) if p is None else p


def dequant_f32(code, scale, dec):
    """code * 2^X as f32 (exact except overflow -> Inf). NaN -> F32_NAN."""
    if scale == 0xFF:
        return F32_NAN
    v = dec(code)
    if v[0] == 'n':
        return F32_NAN
    if v[0] == 'i':
        return f32_encode(v)
    if v[2] == 0:
        return 0x80000000 if v[1] else 0
    return rn_f32(v[1], v[2], v[3] + scale - 127)


def pow2_f32(x):
    """2^x rounded to f32 (RN: underflow to a subnormal/0, overflow to Inf)."""
    if x >= 0:
        return rn_f32(False, 1 << x, 0)
    return rn_f32(False, 1, x)


# ---------------------------------------------------------------------------
# The fused sum (one tensor-core instruction)
# ---------------------------------------------------------------------------

# Foils: readings of the fused sum that docs/ORDERS.md rejects (an older
# reading of this reference among them). Only gen_vectors.py uses them, to
# show that each edge vector tells the contract apart from the foil it names.
FOILS = {
    'saturate': 'a sum of 2^128 or more rounds toward zero to the largest finite value',
    'zeros-align': 'zero products (padding included) take part in the alignment exponent M',
    'zero-c-skip': 'a zero C takes no part in the alignment exponent M',
}
_active_foils = set()


@contextlib.contextmanager
def foil(name):
    """Evaluate with the fused sum read as FOILS[name] (never the contract)."""
    assert name in FOILS, name
    _active_foils.add(name)
    try:
        yield
    finally:
        _active_foils.discard(name)


def fused_sum(prods, c_bits, F, O, emin_in):
    """prods: list of (a_val, b_val, xsum, scale_nan) with a_val/b_val value
    tuples of the `in` type, xsum the extra nominal exponent (MX scale=fused:
    Xa + Xb, else 0), scale_nan True if a block scale is NaN.
    c_bits: f32 bits of C (or None: no C term). Returns f32 bits."""
    vc = f32_decode(c_bits) if c_bits is not None else None
    nan = False
    infs = set()
    for a, b, xs, sn in prods:
        if sn or a[0] == 'n' or b[0] == 'n':
            nan = True
            continue
        p = _mul_exact(a, b)
        if p is None:
            nan = True
        elif p[0] == 'i':
            infs.add(p[1])
    if vc is not None:
        if vc[0] == 'n':
            nan = True
        elif vc[0] == 'i':
            infs.add(vc[1])
    if nan or len(infs) > 1:
        return TC_NAN
    if infs:
        return f32_encode(('i', infs.pop()))
    terms = []  # (neg, smag, sexp, e)
    for a, b, xs, _ in prods:
        na, ma, sa, ea = decompose(a, emin_in)
        nb, mb, sb, eb = decompose(b, emin_in)
        terms.append((na ^ nb, ma * mb, sa + sb, ea + eb + xs))
    # zero products (padding included) take no part in the alignment; C
    # (the first operand of the instruction) always does, a zero C at -126
    if 'zeros-align' not in _active_foils:
        terms = [t for t in terms if t[1] != 0]
    if vc is not None and not ('zero-c-skip' in _active_foils and vc[2] == 0):
        terms.append(decompose(vc, -126))
    if not terms:
        return 0
    M = max(t[3] for t in terms)
    S = 0
    for neg, smag, sexp, e in terms:
        sh = sexp + F + e - M
        t = smag << sh if sh >= 0 else smag >> (-sh)
        S += -t if neg else t
    if S == 0:
        return 0
    if abs(S).bit_length() - 1 + M - F >= 128 and 'saturate' not in _active_foils:
        return f32_encode(('i', S < 0))  # no saturation: 2^128 or more is Inf
    r = round_dyadic(S < 0, abs(S), M - F, O + 1, -126, 127, 'RZ')
    return f32_encode(r)


# ---------------------------------------------------------------------------
# Spelling
# ---------------------------------------------------------------------------

PRESETS = {
    'hopper-bf16': 'mma(k=16,f=25,in=bf16)',
    'hopper-f16': 'mma(k=16,f=25,in=f16)',
    'hopper-fp8-wgmma': 'mma(k=32,f=13,out=13,in=e4m3)',
    'hopper-fp8-mma-sync': 'mma(k=32,f=25,split=mod4,c=late,in=e4m3)',
    'ampere-bf16': 'mma(k=16,f=24,split=halves,in=bf16)',
    'ada-fp8': 'mma(k=32,f=13,out=13,split=halves,in=e4m3)',
    'blackwell-mxf8f6f4': 'mma(k=32,f=25,in=e4m3);scale=fused',
    'deepgemm-fp8': 'mma(k=32,f=13,out=13,in=e4m3);promote=128',
}

KEYS = ['ktile', 'tile', 'split', 'align', 'lanes', 'reduce', 'promote', 'scale', 'out']
MMA_PARAMS = ['k', 'f', 'out', 'split', 'c', 'in']
U32_MAX = 2**32 - 1

# Unicode White_Space (ORDERS.md "Parsing rules": whitespace is ignored)
WHITESPACE = frozenset([chr(c) for c in range(0x09, 0x0E)] + ['\x20', '\x85', '\xa0', '\u1680']
                       + [chr(c) for c in range(0x2000, 0x200B)]
                       + ['\u2028', '\u2029', '\u202f', '\u205f', '\u3000'])

# Reason classes of a rejected spelling (ORDERS.md "Parsing rules")
KINDS = ('syntax', 'unknown', 'value', 'repeat', 'missing', 'combination')


def _err(kind, item, msg):
    """A parse error of class `kind`; `item` is the text the message names."""
    assert kind in KINDS and item in msg, (kind, item, msg)
    e = OrderError(msg)
    e.kind = kind
    e.item = item
    return e


def _int(item, v, lo, hi=U32_MAX):
    """INT := ASCII decimal digits, lo <= value <= hi."""
    if not v or any(ch not in '0123456789' for ch in v) or not lo <= int(v) <= hi:
        raise _err('value', f"'{item}'", f"'{item}': expected an integer in [{lo}, {hi}], got {v!r}")
    return int(v)


def _word(item, v, words):
    if v not in words:
        raise _err('value', f"'{item}'", f"'{item}': expected one of {', '.join(words)}")
    return v


def _parse_mma(params):
    """PARAMS of mma(...): comma-separated key=value, each key at most once,
    checked left to right; then the required keys and the combinations."""
    mp = {}
    for p in params.split(',') if params else []:
        if '=' not in p:
            raise _err('syntax', f"'{p}'", f"mma parameter '{p}': expected key=value")
        key, v = p.split('=', 1)
        if key in mp:
            raise _err('repeat', f"'{p}'", f"mma parameter '{p}': '{key}' given twice")
        if key == 'k':
            mp[key] = _int(p, v, 1)
        elif key == 'f':
            mp[key] = _int(p, v, 1, 60)
        elif key == 'out':
            mp[key] = _int(p, v, 1, 23)
        elif key == 'split':
            mp[key] = _word(p, v, ('none', 'halves', 'mod4'))
        elif key == 'c':
            mp[key] = _word(p, v, ('fused', 'late'))
        elif key == 'in':
            mp[key] = _word(p, v, ('bf16', 'f16', 'e4m3', 'e5m2', 'f32'))
        else:
            raise _err('unknown', f"'{p}'", f"unknown mma parameter '{key}' in '{p}'; expected {', '.join(MMA_PARAMS)}")
    for need in ('k', 'f'):
        if need not in mp:
            raise _err('missing', f'{need}=', f'mma(...) needs {need}=')
    out = dict(k=mp['k'], f=mp['f'], out=mp.get('out', 23), split=mp.get('split', 'none'),
               c=mp.get('c', 'fused'), **{'in': mp.get('in', _default_in(mp['f']))})
    if out['split'] == 'halves' and out['k'] % 2:
        raise _err('combination', 'split=halves', f"mma split=halves needs an even k, got k={out['k']}")
    if out['split'] == 'mod4' and out['k'] % 4:
        raise _err('combination', 'split=mod4', f"mma split=mod4 needs k divisible by 4, got k={out['k']}")
    return out


def _default_in(f):
    return 'e4m3' if f == 13 else 'bf16'


def _strip(spec):
    return ''.join(ch for ch in spec if ch not in WHITESPACE)


def parse(spec):
    """Parse and validate an order spelling (ORDERS.md "Spelling" and
    "Parsing rules"). Raises OrderError with .kind (one of KINDS) and .item
    (the text the message names)."""
    s = _strip(spec)
    if not s:
        raise _err('syntax', 'empty', 'empty order; expected fma, muladd, mma(k=..,f=..) or a preset')
    items = s.split(';')
    head, user = items[0], items[1:]
    preset = None
    if head in PRESETS:
        preset = head
        exp = PRESETS[head].split(';')
        head, preset_items = exp[0], exp[1:]
    else:
        preset_items = []
    cfg = dict(family=None, mma=None, ktile=None, tile='carry', split=1, interleave=False, align=None,
               lanes=None, reduce=None, promote=None, scale=None, out='f32')
    if head in ('fma', 'muladd'):
        cfg['family'] = head
    elif head.startswith('mma(') and head.endswith(')'):
        cfg['family'] = 'mma'
        cfg['mma'] = _parse_mma(head[4:-1])
    else:
        raise _err('unknown', f"'{head}'", f"unknown family '{head}' (item 1); expected fma, muladd, "
                   f"mma(k=..,f=..) or a preset: {', '.join(PRESETS)}")
    preset_keys = set()
    for item in preset_items:
        key, v = item.split('=', 1)
        _set_key(cfg, item, key, v)
        preset_keys.add(key)
    seen = set()
    for n, item in enumerate(user, start=2):
        if '=' not in item:
            raise _err('syntax', f"'{item}'", f"item {n} '{item}': expected key=value")
        key, v = item.split('=', 1)
        if key in preset_keys:
            raise _err('repeat', f"'{item}'", f"item {n} '{item}': key '{key}' is already set by preset "
                       f"'{preset}' (spell out its expansion {PRESETS[preset]} to change it)")
        if key in seen:
            raise _err('repeat', f"'{item}'", f"item {n} '{item}': key '{key}' given twice")
        seen.add(key)
        if key not in KEYS:
            raise _err('unknown', f"'{key}'", f"item {n}: unknown key '{key}'; expected one of: {', '.join(KEYS)}")
        _set_key(cfg, item, key, v)
    if cfg['lanes'] == 1:
        cfg['lanes'] = None  # a key at its default value is the same as no key
    _validate(cfg)
    if cfg['align'] == 1:
        cfg['align'] = None  # every part starts on a multiple of 1
    return cfg


def _set_key(cfg, item, key, v):
    if key == 'ktile':
        cfg['ktile'] = _int(item, v, 1)
    elif key == 'tile':
        cfg['tile'] = _word(item, v, ('carry', 'fresh'))
    elif key == 'split':
        num, sep, mode = v.partition('/')
        if sep and mode != 'interleave':
            raise _err('value', f"'{item}'", f"'{item}': unknown split mode '{mode}'; expected interleave")
        cfg['split'] = _int(item, num, 1)
        cfg['interleave'] = bool(sep)
    elif key == 'align':
        cfg['align'] = _int(item, v, 1)
    elif key == 'lanes':
        cfg['lanes'] = _int(item, v, 1)
    elif key == 'reduce':
        cfg['reduce'] = _word(item, v, ('serial', 'pairwise', 'butterfly'))
    elif key == 'promote':
        cfg['promote'] = _int(item, v, 1)
    elif key == 'scale':
        cfg['scale'] = _word(item, v, ('dequant', 'block', 'fused'))
    elif key == 'out':
        cfg['out'] = _word(item, v, ('f32', 'bf16', 'f16'))


def _reduce_of(c):
    return c['reduce'] or ('butterfly' if c['lanes'] is not None else 'serial')


def _validate(c):
    """The combination rules, checked in this order (ORDERS.md "Parsing rules")."""
    if c['lanes'] is not None:
        L, T = c['lanes'], c['ktile']
        if c['split'] > 1 or c['interleave']:
            raise _err('combination', 'lanes', 'lanes cannot be combined with split (split=S or split=S/interleave)')
        if T is not None and c['tile'] != 'fresh':
            raise _err('combination', 'tile=fresh', f'lanes with ktile={T} needs tile=fresh '
                       f'(lanes={L};ktile={T};tile=fresh), or drop ktile')
        if T is not None and T % L:
            raise _err('combination', 'multiple of lanes', f'lanes={L};ktile={T};tile=fresh needs ktile to be '
                       'a multiple of lanes')
    if _reduce_of(c) == 'butterfly':
        # over the lanes, or over the parts of a split (lanes exclude split)
        what, L = ('lanes', c['lanes']) if c['lanes'] is not None else ('split', c['split'])
        if L == 1:
            raise _err('combination', 'butterfly', 'reduce=butterfly needs lanes=L (GEMV lanes) or split=S '
                       '(split parts), a power of two')
        if L & (L - 1):
            raise _err('combination', 'butterfly', f'reduce=butterfly needs {what} to be a power of two, got {L}')
    if c['interleave'] and c['ktile'] is None:
        raise _err('combination', 'interleave', 'split=S/interleave needs ktile=T (tiles are dealt to parts)')
    if c['align'] is not None and (c['split'] < 2 or c['interleave']):
        raise _err('combination', 'contiguous split', f"align={c['align']} needs a contiguous split=S with S >= 2")
    if c['tile'] == 'fresh' and c['ktile'] is None:
        raise _err('combination', 'tile=fresh', 'tile=fresh needs ktile=T')
    if c['promote'] is not None:
        if c['family'] != 'mma':
            raise _err('combination', 'promote', 'promote applies to mma families only')
        if c['promote'] % c['mma']['k']:
            raise _err('combination', 'promote', f"promote={c['promote']} must be a multiple of the mma k={c['mma']['k']}")
    if c['scale'] == 'fused' and c['family'] != 'mma':
        raise _err('combination', 'scale=fused', 'scale=fused applies to mma families only (use scale=block or dequant)')
    if c['scale'] == 'block' and c['family'] == 'mma' and c['promote'] != MX_BLOCK:
        raise _err('combination', 'scale=block', f'scale=block with an mma family needs promote={MX_BLOCK} '
                   '(one promotion per MX block)')
    if c['scale'] == 'fused' and c['mma']['k'] != MX_BLOCK:
        raise _err('combination', 'scale=fused', f"scale=fused needs mma k={MX_BLOCK} (one MX block per step), "
                   f"got k={c['mma']['k']}")


def canonical(spec):
    """The canonical spelling (ORDERS.md "Parsing rules"): family (a preset
    spelled out as its mma(...) expansion; mma parameters in the order k, f,
    out, split, c, in, defaults omitted), then the keys in table order,
    defaults and keys without effect omitted."""
    c = parse(spec) if isinstance(spec, str) else spec
    if c['family'] == 'mma':
        m = c['mma']
        s = f"mma(k={m['k']},f={m['f']}"
        if m['out'] != 23:
            s += f",out={m['out']}"
        if m['split'] != 'none':
            s += f",split={m['split']}"
        if m['c'] != 'fused':
            s += f",c={m['c']}"
        if m['in'] != _default_in(m['f']):
            s += f",in={m['in']}"
        s += ')'
    else:
        s = c['family']
    if c['ktile'] is not None and (c['tile'] == 'fresh' or c['interleave']):
        s += f";ktile={c['ktile']}"  # with tile=carry and no interleave a ktile changes nothing
    if c['tile'] == 'fresh':
        s += ';tile=fresh'
    if c['split'] > 1 or c['interleave']:
        s += f";split={c['split']}" + ('/interleave' if c['interleave'] else '')
    if c['align'] is not None:
        s += f";align={c['align']}"
    if c['lanes'] is not None:
        s += f";lanes={c['lanes']}"
    if c['reduce'] is not None and c['reduce'] != ('butterfly' if c['lanes'] is not None else 'serial'):
        s += f";reduce={c['reduce']}"
    if c['promote'] is not None:
        s += f";promote={c['promote']}"
    if c['scale'] not in (None, 'dequant'):
        s += f";scale={c['scale']}"
    if c['out'] != 'f32':
        s += f";out={c['out']}"
    return s


# ---------------------------------------------------------------------------
# Parts and reductions
# ---------------------------------------------------------------------------

def _cut(seq, w):
    return [seq[i:i + w] for i in range(0, len(seq), w)]


def build_parts(cfg, n):
    """Parts over n units (k, or MX blocks). Returns a list of parts; a part is
    (tiles, fresh): tiles is a list of unit lists. fresh: each tile from +0,
    tiles combined serially; otherwise the tiles are one chain."""
    fresh = cfg['tile'] == 'fresh'
    units = list(range(n))
    if cfg['lanes'] is not None:
        L = cfg['lanes']
        if not fresh:
            return [([units[l::L]], False) for l in range(L)]
        # lanes cut into fresh k-tiles: lane l's terms of each k-tile
        # [t*T, (t+1)*T) from +0, the lane's tiles combined serially
        T = cfg['ktile']
        lanes = []
        for l in range(L):
            tiles = [[u for u in range(t * T, min(n, (t + 1) * T)) if u % L == l] for t in range(-(-n // T))]
            lanes.append(([t for t in tiles if t], True))
        return lanes
    T = cfg['ktile'] if cfg['ktile'] is not None else n
    S = cfg['split']
    if cfg['interleave']:
        tiles = _cut(units, T)
        parts = []
        for s in range(S):
            mine = tiles[s::S]
            if fresh:
                parts.append((mine, True))
            else:
                parts.append(([[k for t in mine for k in t]], False))
        return parts
    if S > 1:
        c = -(-n // S)
        if cfg['align'] is not None:
            # parts start on multiples of align: ceil(n / S) rounded up
            c = -(-c // cfg['align']) * cfg['align']
        parts = []
        for s in range(S):
            p = units[s * c:(s + 1) * c]
            if fresh:
                parts.append((_cut(p, T), True))
            else:
                parts.append(([p], False))
        return parts
    if fresh:
        return [([t], False) for t in _cut(units, T)]
    return [([units], False)]


def reduce_parts(vals, how):
    if how == 'serial':
        v = vals[0]
        for x in vals[1:]:
            v = add_rn(v, x)
        return v
    if how == 'pairwise':
        vals = list(vals)
        while len(vals) > 1:
            nxt = [add_rn(vals[i], vals[i + 1]) for i in range(0, len(vals) - 1, 2)]
            if len(vals) % 2:
                nxt.append(vals[-1])
            vals = nxt
        return vals[0]
    if how == 'butterfly':
        v = list(vals)
        L = len(v)
        off = L // 2
        while off >= 1:
            v = [add_rn(v[l], v[l ^ off]) for l in range(L)]
            off //= 2
        return v[0]
    raise ValueError(how)


# ---------------------------------------------------------------------------
# Chains (one part)
# ---------------------------------------------------------------------------

ZERO = 0


def _tc_step(chunk_prods, C, mp, emin_in):
    Kc = mp['k']
    pad = (('f', False, 0, 0), ('f', False, 0, 0), 0, False)
    prods = list(chunk_prods) + [pad] * (Kc - len(chunk_prods))
    if mp['split'] == 'none':
        groups = [prods]
    elif mp['split'] == 'halves':
        groups = [prods[:Kc // 2], prods[Kc // 2:]]
    else:
        groups = [[p for i, p in enumerate(prods) if i % 4 in (0, 1)],
                  [p for i, p in enumerate(prods) if i % 4 in (2, 3)]]
    F, O = mp['f'], mp['out']
    if mp['c'] == 'fused':
        acc = C
        for g in groups:
            acc = fused_sum(g, acc, F, O, emin_in)
        return acc
    acc = ZERO
    for g in groups:
        acc = fused_sum(g, acc, F, O, emin_in)
    return add_rn(C, acc)


def _tc_chain(ks, prod, mp, emin_in):
    acc = ZERO
    for chunk in _cut(ks, mp['k']):
        acc = _tc_step([prod(k) for k in chunk], acc, mp, emin_in)
    return acc


class _Elem:
    """Accessors for one output element (i, j)."""


def _chain(cfg, units, el):
    fam = cfg['family']
    if el.mode == 'block':  # fma / muladd on block terms
        acc = ZERO
        for blk in units:
            t = el.block_term(blk)
            if fam == 'fma':
                acc = add_value_rn(acc, t)
            else:
                acc = add_rn(acc, value_rn(t))
        return acc
    if fam == 'fma':
        acc = ZERO
        for k in units:
            a, b = el.ab(k)
            acc = fma_rn(a, b, acc)
        return acc
    if fam == 'muladd':
        acc = ZERO
        for k in units:
            a, b = el.ab(k)
            acc = add_rn(acc, mul_rn(a, b))
        return acc
    mp = cfg['mma']
    emin_in = TYPES[mp['in']]['emin']
    P = cfg['promote']
    if P is None:
        return _tc_chain(units, el.prod, mp, emin_in)
    final = ZERO
    for blk in _cut(units, P):
        p = _tc_chain(blk, el.prod, mp, emin_in)
        s = el.promote_scale(blk)
        final = fma_rn(s, p, final)
    return final


def _eval_element(cfg, n_units, el):
    parts = build_parts(cfg, n_units)
    vals = []
    for tiles, fresh in parts:
        if fresh:
            if not tiles:
                vals.append(ZERO)
                continue
            v = _chain(cfg, tiles[0], el)
            for t in tiles[1:]:
                v = add_rn(v, _chain(cfg, t, el))
            vals.append(v)
        else:
            vals.append(_chain(cfg, tiles[0], el))
    how = cfg['reduce'] or ('butterfly' if cfg['lanes'] is not None else 'serial')
    r = vals[0] if len(vals) == 1 else reduce_parts(vals, how)
    if cfg['out'] == 'bf16':
        r = f32_to_bf16_widened(r)
    elif cfg['out'] == 'f16':
        r = f32_to_f16_widened(r)
    return r


# ---------------------------------------------------------------------------
# GEMM
# ---------------------------------------------------------------------------

def gemm(spec, m, n, k, a=None, b=None, mx=None):
    cfg = parse(spec) if isinstance(spec, str) else spec
    fam = cfg['family']
    out = []
    if mx is None:
        if cfg['scale'] not in (None, 'dequant'):  # dequant is the default: no key
            raise OrderError(f"scale={cfg['scale']} needs MX inputs (codes and scales)")
        assert len(a) == m * k and len(b) == k * n
        if fam == 'mma':
            T = cfg['mma']['in']
            for name, arr in (('a', a), ('b', b)):
                for idx, x in enumerate(arr):
                    if not representable(f32_decode(x), T):
                        raise OrderError(f'{name}[{idx}] = {x:08x} is not exactly representable in {T}')
        for i in range(m):
            for j in range(n):
                el = _Elem()
                el.mode = 'plain'
                el.ab = (lambda kk, i=i, j=j: (a[i * k + kk], b[kk * n + j]))
                el.prod = (lambda kk, i=i, j=j: (f32_decode(a[i * k + kk]), f32_decode(b[kk * n + j]), 0, False))
                el.promote_scale = lambda blk: 0x3F800000
                out.append(_eval_element(cfg, k, el))
        return out

    # MX inputs
    if k % MX_BLOCK:
        raise OrderError(f'MX inputs need K a multiple of {MX_BLOCK}, got {k}')
    elem_t, dec = MX_FORMATS[mx['format']]
    ac, asc, bc, bsc = mx['a_codes'], mx['a_scales'], mx['b_codes'], mx['b_scales']
    nb = k // MX_BLOCK
    assert len(ac) == m * k and len(bc) == k * n and len(asc) == m * nb and len(bsc) == nb * n
    scale = cfg['scale'] or 'dequant'
    if scale == 'dequant':
        a32 = [dequant_f32(ac[i * k + kk], asc[i * nb + kk // MX_BLOCK], dec) for i in range(m) for kk in range(k)]
        b32 = [dequant_f32(bc[kk * n + j], bsc[(kk // MX_BLOCK) * n + j], dec) for kk in range(k) for j in range(n)]
        cfg2 = dict(cfg)
        cfg2['scale'] = None
        return gemm(cfg2, m, n, k, a=a32, b=b32)
    if fam == 'mma':
        T = cfg['mma']['in']
        for name, arr in (('a_codes', ac), ('b_codes', bc)):
            for idx, x in enumerate(arr):
                if not representable(dec(x), T):
                    raise OrderError(f'{name}[{idx}] = {x:02x} is not exactly representable in {T}')
    for i in range(m):
        for j in range(n):
            el = _Elem()

            def xa(kk, i=i):
                return asc[i * nb + kk // MX_BLOCK]

            def xb(kk, j=j):
                return bsc[(kk // MX_BLOCK) * n + j]

            if fam in ('fma', 'muladd'):
                if scale != 'block':
                    raise OrderError(f'scale={scale} needs an mma family')
                el.mode = 'block'
                el.block_term = (lambda blk, i=i, j=j: block_dot(
                    ac[i * k + blk * MX_BLOCK:i * k + (blk + 1) * MX_BLOCK], asc[i * nb + blk],
                    [bc[kk * n + j] for kk in range(blk * MX_BLOCK, (blk + 1) * MX_BLOCK)],
                    bsc[blk * n + j], dec))
                out.append(_eval_element(cfg, nb, el))
                continue
            el.mode = 'mma'
            if scale == 'fused':
                el.prod = (lambda kk, i=i, j=j, xa=xa, xb=xb: (
                    dec(ac[i * k + kk]), dec(bc[kk * n + j]),
                    (xa(kk) - 127) + (xb(kk) - 127), xa(kk) == 0xFF or xb(kk) == 0xFF))
                el.promote_scale = lambda blk: 0x3F800000
            else:  # block, promote=32: chain on unscaled code values
                el.prod = (lambda kk, i=i, j=j: (dec(ac[i * k + kk]), dec(bc[kk * n + j]), 0, False))

                def ps(blk, xa=xa, xb=xb):
                    b0 = blk[0]
                    if b0 % MX_BLOCK or blk != list(range(b0, b0 + MX_BLOCK)):
                        raise OrderError('scale=block: a promotion block is not one aligned MX block')
                    sa, sb = xa(b0), xb(b0)
                    if sa == 0xFF or sb == 0xFF:
                        return F32_NAN
                    return pow2_f32((sa - 127) + (sb - 127))
                el.promote_scale = ps
            out.append(_eval_element(cfg, k, el))
    return out


def hex32(xs):
    return ['%08x' % x for x in xs]
