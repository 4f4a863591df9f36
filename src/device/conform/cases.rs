//! Conformance case generation: the fixed and random orders, shapes and input
//! classes, the screen that keeps only discriminating cases, and the inputs
//! and CPU model output of a case (regenerated from its seed).

use super::*;

fn random_code(r: &mut SplitMix64, elem: InType, class: InputClass) -> u16 {
    match elem {
        InType::F32 => unreachable!("f32 values are generated as bits"),
        InType::Bf16 => {
            let e = match class {
                InputClass::Tiny => r.range_i64(0, 30) as u16,
                _ => r.range_i64(127 - 24, 127 + 24) as u16,
            };
            ((r.next_u32() & 1) as u16) << 15 | e << 7 | (r.next_u32() & 0x7F) as u16
        }
        InType::F16 => {
            let e = match class {
                InputClass::Tiny => r.range_i64(0, 4) as u16,
                _ => r.range_i64(1, 27) as u16,
            };
            ((r.next_u32() & 1) as u16) << 15 | e << 10 | (r.next_u32() & 0x3FF) as u16
        }
        InType::E4M3 | InType::E5M2 => {
            let e5 = elem == InType::E5M2;
            loop {
                let c = match class {
                    InputClass::Tiny => (r.next_u32() & 0x8F) as u16, // exponent field 0..1
                    _ => (r.next_u32() & 0xFF) as u16,
                };
                let mag = c & 0x7F;
                let special = if e5 { mag >= 0x7C } else { mag == 0x7F };
                if !special {
                    return c;
                }
            }
        }
    }
}

fn random_f32(r: &mut SplitMix64, class: InputClass, operand_b: bool) -> f32 {
    let sign = (r.next_u32() & 1) << 31;
    let mant = r.next_u32() & 0x7F_FFFF;
    let exp = match class {
        // products of an A in [2^-126, 2^-96] and a B in [2^-30, 2^0] are subnormal in f32
        InputClass::Tiny if !operand_b => {
            if r.chance(1, 4) {
                0
            } else {
                r.range_i64(1, 31) as u32
            }
        }
        InputClass::Tiny => r.range_i64(97, 127) as u32,
        _ => r.range_i64(127 - 30, 127 + 30) as u32,
    };
    f32::from_bits(sign | exp << 23 | mant)
}

fn special_code(r: &mut SplitMix64, elem: InType) -> u16 {
    let s = (r.next_u32() & 1) as u16;
    match elem {
        InType::F32 => unreachable!(),
        InType::Bf16 => [0x0000, 0x7F80, 0x7FC0, 0x7F7F, 0x0001][r.below(5) as usize] | s << 15,
        InType::F16 => [0x0000, 0x7C00, 0x7E00, 0x7BFF, 0x0001][r.below(5) as usize] | s << 15,
        InType::E4M3 => [0x00, 0x7F, 0x7E, 0x01][r.below(4) as usize] | s << 7,
        InType::E5M2 => [0x00, 0x7C, 0x7E, 0x7B, 0x01][r.below(5) as usize] | s << 7,
    }
}

fn special_f32(r: &mut SplitMix64) -> f32 {
    let s = if r.chance(1, 2) { -1.0f32 } else { 1.0 };
    s * [
        0.0,
        f32::INFINITY,
        f32::NAN,
        f32::MAX,
        f32::from_bits(1),
        f32::MIN_POSITIVE,
    ][r.below(6) as usize]
}

impl ConformCase {
    pub fn parsed_order(&self) -> Result<Order> {
        self.order
            .parse::<Order>()
            .map_err(|e| DeviceError::Capture(format!("case {}: {e}", self.id)))
    }

    pub fn mx_format(&self) -> Option<MxFormat> {
        self.mx.then_some(if self.elem == InType::E5M2 {
            MxFormat::Fp8E5M2
        } else {
            MxFormat::Fp8E4M3
        })
    }

    pub fn plan(&self) -> Result<GpuPlan> {
        let mx = self.mx.then_some(self.elem == InType::E5M2);
        GpuPlan::new(&self.parsed_order()?, mx, self.backend16).map_err(DeviceError::Refused)
    }

    /// Regenerates the inputs (deterministic in the seed).
    pub fn inputs(&self) -> CaseInputs {
        let (m, n, k) = (self.m, self.n, self.k);
        let gen = |rows: usize, stream: u64, operand_b: bool| -> (Vec<f32>, Vec<u16>) {
            let mut vals = vec![0f32; rows * k];
            let mut codes = Vec::new();
            if self.elem.format().is_some() {
                codes = vec![0u16; rows * k];
            }
            for row in 0..rows {
                let mut r = SplitMix64::for_item(self.seed ^ stream, row as u64);
                let half = if self.class == InputClass::Cancel { k / 2 } else { k };
                for kk in 0..k {
                    let idx = row * k + kk;
                    if kk >= half && kk - half < half {
                        // mirror of the first half; B negated
                        let src = row * k + kk - half;
                        if let Some(f) = self.elem.format() {
                            let c = codes[src];
                            let sign_bit = if f.bits() == 16 { 0x8000 } else { 0x80 };
                            codes[idx] = if operand_b { c ^ sign_bit } else { c };
                            vals[idx] = f.decode_f32(codes[idx]);
                        } else {
                            vals[idx] = if operand_b { -vals[src] } else { vals[src] };
                        }
                        continue;
                    }
                    // about one special per row of 4K entries: most dot products stay finite
                    let special = self.class == InputClass::Specials && r.chance(1, 4 * k as u64);
                    if self.class == InputClass::Sparse && r.chance(1, 2) {
                        let neg = r.chance(1, 2);
                        if let Some(f) = self.elem.format() {
                            let sign_bit = if f.bits() == 16 { 0x8000 } else { 0x80 };
                            codes[idx] = if neg { sign_bit } else { 0 };
                            vals[idx] = f.decode_f32(codes[idx]);
                        } else {
                            vals[idx] = if neg { -0.0 } else { 0.0 };
                        }
                        continue;
                    }
                    if let Some(f) = self.elem.format() {
                        let c = if special {
                            special_code(&mut r, self.elem)
                        } else {
                            random_code(&mut r, self.elem, self.class)
                        };
                        codes[idx] = c;
                        vals[idx] = f.decode_f32(c);
                    } else {
                        vals[idx] = if special {
                            special_f32(&mut r)
                        } else {
                            random_f32(&mut r, self.class, operand_b)
                        };
                    }
                }
            }
            (vals, codes)
        };
        let (a, a_codes) = gen(m, 0xA, false);
        let (bt, bt_codes) = gen(n, 0xB, true);
        let (mut sa, mut sb) = (Vec::new(), Vec::new());
        if self.mx {
            let kb = k / 32;
            let scales = |rows: usize, stream: u64| -> Vec<u8> {
                let mut s = vec![127u8; rows * kb];
                for row in 0..rows {
                    let mut r = SplitMix64::for_item(self.seed ^ stream, row as u64);
                    for b in 0..kb {
                        let half = if self.class == InputClass::Cancel { kb / 2 } else { kb };
                        s[row * kb + b] = if b >= half && b - half < half {
                            s[row * kb + b - half]
                        } else {
                            match self.class {
                                InputClass::Tiny => r.range_i64(0, 20) as u8,
                                InputClass::Specials if r.chance(1, 20) => {
                                    [0u8, 1, 253, 254, 0xFF][r.below(5) as usize]
                                }
                                _ => r.range_i64(127 - 12, 127 + 12) as u8,
                            }
                        };
                    }
                }
                s
            };
            sa = scales(m, 0x5A);
            sb = scales(n, 0x5B);
        }
        CaseInputs {
            a,
            bt,
            a_codes,
            bt_codes,
            sa,
            sb,
        }
    }

    /// The CPU model's output (rows subset, or all), row-major `[rows][N]`.
    pub fn model(&self, inputs: &CaseInputs, rows: Option<&[usize]>) -> Result<Vec<f32>> {
        let order = self.parsed_order()?;
        let (a_codes, b_codes): (Vec<u8>, Vec<u8>);
        let problem = if let Some(fmt) = self.mx_format() {
            a_codes = inputs.a_codes.iter().map(|&c| c as u8).collect();
            b_codes = inputs.bt_codes.iter().map(|&c| c as u8).collect();
            Problem {
                a: Matrix::Mx {
                    codes: &a_codes,
                    scales: &inputs.sa,
                    format: fmt,
                },
                b: Matrix::Mx {
                    codes: &b_codes,
                    scales: &inputs.sb,
                    format: fmt,
                },
                m: self.m,
                n: self.n,
                k: self.k,
                b_layout: BLayout::Nk,
            }
        } else {
            Problem {
                a: Matrix::F32(&inputs.a),
                b: Matrix::F32(&inputs.bt),
                m: self.m,
                n: self.n,
                k: self.k,
                b_layout: BLayout::Nk,
            }
        };
        gemm(&order, &problem, rows).map_err(|e| DeviceError::Refused(format!("case {}: model: {e}", self.id)))
    }
}
/// Orders that every run covers once (each sm_90-expressible family), with
/// their input element type, MX flag and 16-bit backend.
pub fn fixed_orders() -> Vec<(&'static str, InType, bool, Backend16)> {
    use Backend16::*;
    vec![
        ("fma", InType::F32, false, MmaSync),
        ("muladd", InType::F32, false, MmaSync),
        ("fma;ktile=64;tile=fresh", InType::F32, false, MmaSync),
        ("fma;ktile=48;tile=fresh;reduce=pairwise", InType::F32, false, MmaSync),
        ("fma;split=4", InType::F32, false, MmaSync),
        ("muladd;split=3;reduce=pairwise", InType::F32, false, MmaSync),
        ("fma;split=4/interleave;ktile=32", InType::F32, false, MmaSync),
        ("fma;split=3;ktile=40;tile=fresh", InType::F32, false, MmaSync),
        ("fma;split=3;align=64", InType::F32, false, MmaSync),
        ("fma;lanes=32", InType::F32, false, MmaSync),
        ("muladd;lanes=8;out=bf16", InType::F32, false, MmaSync),
        ("fma;out=f16", InType::F32, false, MmaSync),
        ("hopper-bf16", InType::Bf16, false, MmaSync),
        ("hopper-f16", InType::F16, false, MmaSync),
        ("hopper-bf16", InType::Bf16, false, Wgmma),
        ("hopper-f16", InType::F16, false, Wgmma),
        ("hopper-bf16;split=4;reduce=pairwise", InType::Bf16, false, MmaSync),
        ("hopper-bf16;split=3;align=128", InType::Bf16, false, MmaSync),
        ("hopper-bf16;ktile=64;tile=fresh", InType::Bf16, false, Wgmma),
        ("hopper-fp8-mma-sync", InType::E4M3, false, MmaSync),
        ("mma(k=32,f=25,split=mod4,c=late,in=e5m2)", InType::E5M2, false, MmaSync),
        ("hopper-fp8-wgmma", InType::E4M3, false, MmaSync),
        ("mma(k=32,f=13,out=13,in=e5m2)", InType::E5M2, false, MmaSync),
        ("deepgemm-fp8", InType::E4M3, false, MmaSync),
        ("deepgemm-fp8;split=2", InType::E4M3, false, MmaSync),
        ("fma", InType::E4M3, true, MmaSync),
        ("muladd;split=2", InType::E5M2, true, MmaSync),
        ("fma;scale=block", InType::E4M3, true, MmaSync),
        (
            "muladd;scale=block;split=3;reduce=pairwise",
            InType::E4M3,
            true,
            MmaSync,
        ),
        ("fma;scale=block;lanes=4", InType::E4M3, true, MmaSync),
        ("hopper-fp8-wgmma;promote=32;scale=block", InType::E4M3, true, MmaSync),
        (
            "hopper-fp8-mma-sync;promote=32;scale=block",
            InType::E4M3,
            true,
            MmaSync,
        ),
        (
            "mma(k=32,f=13,out=13,in=e5m2);promote=32;scale=block;out=bf16",
            InType::E5M2,
            true,
            MmaSync,
        ),
    ]
}

fn random_order(r: &mut SplitMix64) -> (String, InType, bool, Backend16) {
    let backend = if r.chance(1, 2) {
        Backend16::MmaSync
    } else {
        Backend16::Wgmma
    };
    let pick = r.below(10);
    let (base, elem, mx): (&str, InType, bool) = match pick {
        0 | 1 => ("fma", InType::F32, false),
        2 => ("muladd", InType::F32, false),
        3 => ("hopper-bf16", InType::Bf16, false),
        4 => ("hopper-f16", InType::F16, false),
        5 => {
            if r.chance(1, 2) {
                ("hopper-fp8-mma-sync", InType::E4M3, false)
            } else {
                ("mma(k=32,f=25,split=mod4,c=late,in=e5m2)", InType::E5M2, false)
            }
        }
        6 => {
            if r.chance(1, 2) {
                ("hopper-fp8-wgmma", InType::E4M3, false)
            } else {
                ("deepgemm-fp8", InType::E4M3, false)
            }
        }
        7 => {
            let e = if r.chance(1, 2) { InType::E4M3 } else { InType::E5M2 };
            (if r.chance(1, 2) { "fma" } else { "muladd" }, e, true)
        }
        8 => (
            if r.chance(1, 2) {
                "fma;scale=block"
            } else {
                "muladd;scale=block"
            },
            InType::E4M3,
            true,
        ),
        _ => (
            if r.chance(1, 2) {
                "hopper-fp8-wgmma;promote=32;scale=block"
            } else {
                "hopper-fp8-mma-sync;promote=32;scale=block"
            },
            InType::E4M3,
            true,
        ),
    };
    let tc = base.starts_with("hopper") || base.starts_with("mma") || base.starts_with("deepgemm");
    let mut keys: Vec<String> = Vec::new();
    let structure = r.below(6);
    let tiles = [8u64, 16, 24, 32, 48, 64, 100, 128, 256];
    let tile = |r: &mut SplitMix64| tiles[r.below(tiles.len() as u64) as usize];
    match structure {
        1 => keys.push(format!("ktile={};tile=fresh", tile(r))),
        2 => keys.push(format!("split={}", r.range_i64(2, 8))),
        3 => keys.push(format!("split={}/interleave;ktile={}", r.range_i64(2, 6), tile(r))),
        4 => keys.push(format!("split={};ktile={};tile=fresh", r.range_i64(2, 4), tile(r))),
        5 if !tc => keys.push(format!("lanes={}", 1u64 << r.range_i64(1, 5))),
        _ => {}
    }
    if matches!(structure, 1..=4) && r.chance(1, 3) {
        keys.push("reduce=pairwise".into());
    }
    match r.below(6) {
        0 => keys.push("out=bf16".into()),
        1 => keys.push("out=f16".into()),
        _ => {}
    }
    let mut s = base.to_string();
    for key in keys {
        s.push(';');
        s.push_str(&key);
    }
    (s, elem, mx, backend)
}

/// Options of a conformance run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ConformOptions {
    pub seed: u64,
    /// Random cases after the fixed ones.
    pub random_cases: usize,
    /// Upper bound on M*N*K per case (keeps the CPU model's time bounded).
    pub max_terms: usize,
}

impl Default for ConformOptions {
    fn default() -> Self {
        ConformOptions {
            seed: 0x6d78_6269,
            random_cases: 96,
            max_terms: 1 << 26,
        }
    }
}

fn shape(r: &mut SplitMix64, mx: bool, max_terms: usize) -> (usize, usize, usize) {
    loop {
        let m = match r.below(5) {
            0 => [1usize, 2, 17, 33, 300][r.below(5) as usize],
            _ => r.range_i64(1, 300) as usize,
        };
        let n = match r.below(4) {
            0 => [8usize, 9, 512][r.below(3) as usize],
            _ => r.range_i64(8, 512) as usize,
        };
        let mut k = match r.below(4) {
            0 => [16usize, 17, 4096, 1000][r.below(4) as usize],
            _ => r.range_i64(16, 4096) as usize,
        };
        if mx {
            k = (k / 32).max(1) * 32;
        }
        if m * n * k <= max_terms {
            return (m, n, k);
        }
    }
}

/// Rows of a case on which [`screen`] evaluates the order and its foils:
/// first, middle and last (the rows every CI replay also recomputes first).
fn screen_rows(m: usize) -> Vec<usize> {
    let mut v = vec![0, m / 2, m.saturating_sub(1)];
    v.dedup();
    v
}

/// Why the generator turned a drawn case down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Screen {
    /// The GPU plan or the CPU model refuses the order on this shape.
    Refused,
    /// Every screened output is NaN: the case cannot tell any two orders apart.
    AllNan,
    /// Every foil gives the same bytes as the order on the screened rows:
    /// a 0-mismatch result would not show that the GPU used *this* order.
    NoFoilDiffers,
}

/// A case is kept only if the model accepts it, its outputs are not all
/// NaN, and at least one foil ([`foils`]) gives different bytes from the
/// claimed order (canonical NaN) on the screened rows. A case that passes
/// discriminates: its GPU bytes can only match one of the order and that foil.
pub fn screen(case: &ConformCase) -> std::result::Result<(), Screen> {
    if case.plan().is_err() {
        return Err(Screen::Refused);
    }
    let order = case.parsed_order().map_err(|_| Screen::Refused)?;
    let rows = screen_rows(case.m);
    let inputs = case.inputs();
    let model = case.model(&inputs, Some(&rows)).map_err(|_| Screen::Refused)?;
    let foil_outputs: Vec<Vec<f32>> = foils(&order)
        .into_iter()
        .filter_map(|foil| {
            let fc = ConformCase {
                order: foil.to_string(),
                ..case.clone()
            };
            fc.model(&inputs, Some(&rows)).ok()
        })
        .collect();
    screen_outputs(&model, &foil_outputs)
}

/// The verdict of [`screen`] on computed outputs: NaN compares as a class
/// (canonical NaN), every other bit counts.
pub fn screen_outputs(model: &[f32], foil_outputs: &[Vec<f32>]) -> std::result::Result<(), Screen> {
    if model.iter().all(|x| x.is_nan()) {
        return Err(Screen::AllNan);
    }
    let bits = |v: &[f32]| v.iter().map(|&x| canonical_bits(x)).collect::<Vec<u32>>();
    let want = bits(model);
    if foil_outputs.iter().any(|f| bits(f) != want) {
        Ok(())
    } else {
        Err(Screen::NoFoilDiffers)
    }
}

/// Attempts per order: the first half keeps a fixed order's assigned input
/// class, the rest may draw any class (some classes cannot separate some
/// orders, e.g. exact sums of tiny products).
const ATTEMPTS_PER_ORDER: usize = 24;

/// The case list of a run: the fixed families first, then random ones.
pub fn generate_cases(opts: &ConformOptions) -> Vec<ConformCase> {
    let mut r = SplitMix64::new(opts.seed);
    let classes = [
        InputClass::Wide,
        InputClass::Tiny,
        InputClass::Cancel,
        InputClass::Specials,
        InputClass::Sparse,
    ];
    let mut cases = Vec::new();
    let mut push =
        |r: &mut SplitMix64, order: String, elem: InType, mx: bool, backend16: Backend16, class: Option<InputClass>| {
            for attempt in 0..ATTEMPTS_PER_ORDER {
                let (m, n, k) = shape(r, mx, opts.max_terms);
                let drawn = classes[r.below(classes.len() as u64) as usize];
                let class = match class {
                    Some(c) if attempt < ATTEMPTS_PER_ORDER / 2 => c,
                    _ => drawn,
                };
                let canonical = match order.parse::<Order>() {
                    Ok(o) => o.to_string(),
                    Err(_) => return false,
                };
                let case = ConformCase {
                    id: cases.len(),
                    order: canonical,
                    backend16,
                    m,
                    n,
                    k,
                    elem,
                    mx,
                    class,
                    seed: r.next_u64(),
                };
                if screen(&case).is_ok() {
                    cases.push(case);
                    return true;
                }
            }
            false
        };
    for (i, (o, e, mx, b)) in fixed_orders().into_iter().enumerate() {
        push(&mut r, o.to_string(), e, mx, b, Some(classes[i % classes.len()]));
    }
    let mut attempts = 0;
    let mut added = 0;
    while added < opts.random_cases && attempts < 50 * opts.random_cases.max(1) {
        attempts += 1;
        let (o, e, mx, b) = random_order(&mut r);
        if push(&mut r, o, e, mx, b, None) {
            added += 1;
        }
    }
    cases
}
