//! Op models as checker subjects (`op:PRESET`): a job's A `[M, K]` is the
//! op's activation (x1, or x for quant-matmul), B the shared weights (x2,
//! w); the model shards A over the ranks and answers each rank's copy of
//! the requested rows, computing only those rows.
//!
//! # Which presets are subjects
//! - `agmm-*` (AllGatherMatmul, MXFP8): A is x1, sharded over `world_size`
//!   ranks in contiguous blocks of `M / world_size` rows (M must divide:
//!   else Unsupported); every rank holds every row, its own shard through
//!   the LOCAL path, the others through the GATHER path. Inputs are values
//!   exactly representable in the MX element type (e4m3); their E8M0
//!   scales come from the knobs: `ID` is 2^0 everywhere; `VAR` for x1 is a
//!   function of the row's own 32-element block (`127 + [-3, 3]`), for x2 a
//!   function of x2's own 32-element block (`127 + [-6, 2]`, varying along
//!   K): never of other rows. A problem given as MX codes brings its own
//!   scales (scale knobs must then be unset).
//! - `quant-*` (dynamic quantization inside the op, one device): A is x, B
//!   is w (f32 values).
//! - `mmrs-*`, `mmar-*` (MatmulReduceScatter/AllReduce): A is x1, B is x2,
//!   K sharded over the ranks and the partials reduced in the preset's rank
//!   order; overrides `;reduction=...;sum=...` (`src/op/reduce_subject.rs`
//!   says which rank holds which row).
//! - Not subjects: `moe-*` needs router logits and one weight matrix
//!   per expert, not one B; `rmsnorm*` has no B (not a GEMM). Naming one
//!   gives one line saying so.
//!
//! # Knobs
//! `world_size` (agmm: one of the preset's sizes), `x1_scales`/`x2_scales`
//! (agmm), `deterministic_comm` (agmm: accepted, no effect: the all-gather
//! copies bytes and adds nothing). A knob a preset cannot honour is refused
//! by [`OpSubject::new`].
//!
//! The model is deterministic; x2's preparation for each path (its scale
//! point, e.g. the GATHER path's re-rounding) is a function of x2 alone and
//! is computed once per distinct x2 (compared byte for byte).

use super::agmm::{self, AgmmSpec, Operands, Prepared};
use super::coupling::{quantize_activation, QuantSpec};
use super::path_sets::PathSet;
use super::reduce_subject::ReduceSubject;
use super::{matmul_values, parse_order, presets, Inputs, OpSpec, Tensor};
use crate::gemm::{BLayout, Matrix, Problem, MX_BLOCK};
use crate::mx::MxFormat;
use crate::order::InType;
use crate::rng::SplitMix64;
use crate::subject::{Knobs, ScaleKind, Subject, SubjectError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The presets that are subjects, and why the others are not.
pub fn subject_presets() -> Vec<&'static str> {
    presets::PRESETS
        .iter()
        .map(|p| p.name)
        .filter(|n| not_a_subject(n).is_none())
        .collect()
}

/// Why a preset is not a subject (None: it is one).
pub fn not_a_subject(name: &str) -> Option<&'static str> {
    if name.starts_with("moe-") {
        Some("it needs router logits and one weight matrix per expert, not one shared B")
    } else if name.starts_with("rmsnorm") {
        Some("it has no shared B (RMSNorm is not a GEMM)")
    } else {
        None
    }
}

enum Kind {
    Agmm(Box<AgmmSpec>),
    Quant(Box<QuantSpec>),
    Reduce(Box<ReduceSubject>),
}

/// x2 as the paths read it, for one B.
struct PreparedB {
    /// B's bits (f32 values, or MX codes then scales), K, N, whether `nk`.
    key: (Vec<u32>, usize, usize, bool),
    c2: Vec<u8>,
    s2: Vec<u8>,
    local: Prepared,
    gather: Option<Prepared>,
    /// Output rows already computed for this B, by (LOCAL path?, the row's
    /// codes and scales as the path reads them): a path's row is a pure
    /// function of exactly these, so the bytes are the same as computing it
    /// again (the checker asks for the same row on many cells).
    rows: Mutex<HashMap<RowKey, Arc<Vec<f32>>>>,
}

type RowKey = (bool, Vec<u8>, Vec<u8>);

/// Most rows remembered per B.
const MEMO_ROWS: usize = 4096;

/// An all-gather-matmul job in the op's own bytes ([`OpSubject::agmm_job`]).
pub struct AgmmJob {
    /// The spec, sharding the job's M rows over the world size.
    pub spec: AgmmSpec,
    /// x1 codes `[M, K]` and E8M0 scales `[M, K/32]`.
    pub c1: Vec<u8>,
    pub s1: Vec<u8>,
    /// x2 codes and scales in the spec's `x2_layout`.
    pub c2: Vec<u8>,
    pub s2: Vec<u8>,
}

/// An op preset as a subject (see the module doc).
pub struct OpSubject {
    preset: &'static str,
    /// The path set in place of the preset's own paths (`,paths=SET`).
    paths: Option<&'static PathSet>,
    /// The name reports use, when the spec had options (`op:P,x2=VAR`).
    label: Option<String>,
    kind: Kind,
    world_size: usize,
    x1: ScaleKind,
    x2: ScaleKind,
    /// The codes of the MX element type's values, by `f32 bits >> 20`
    /// (-1: none; an element value has no f32 mantissa bits below 20).
    codes: Vec<i16>,
}

/// Prepared x2s kept per (preset, x2 scale kind), shared by every subject
/// of that preset and kind in the process (a matrix builds one subject per
/// setting; x2's preparation and a row's output do not depend on the world
/// size, x1's scale kind or the communication knob).
type Shared = Arc<Mutex<Vec<Arc<PreparedB>>>>;

/// Most distinct x2s kept per (preset, kind).
const SHARED_BS: usize = 2;

fn shared_cache(preset: &'static str, paths: Option<&'static str>, kind: ScaleKind) -> Shared {
    type Key = (&'static str, Option<&'static str>, ScaleKind);
    static CACHES: Mutex<Vec<(Key, Shared)>> = Mutex::new(Vec::new());
    let mut all = CACHES.lock().expect("cache lock");
    if let Some((_, c)) = all.iter().find(|(k, _)| *k == (preset, paths, kind)) {
        return c.clone();
    }
    let c: Shared = Arc::new(Mutex::new(Vec::new()));
    all.push(((preset, paths, kind), c.clone()));
    c
}

/// B's bits: f32 values, or MX codes then scales.
fn b_bits(b: &Matrix) -> Vec<u32> {
    match b {
        Matrix::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
        Matrix::Mx { codes, scales, .. } => codes.iter().chain(scales.iter()).map(|&c| c as u32).collect(),
    }
}

/// Whether `b` has exactly these bits (compared in chunks, so it vectorises).
fn same_b(key: &[u32], b: &Matrix) -> bool {
    match b {
        Matrix::F32(v) => {
            key.len() == v.len()
                && key
                    .chunks(64)
                    .zip(v.chunks(64))
                    .all(|(x, y)| x.iter().zip(y).fold(0u32, |acc, (p, q)| acc | (p ^ q.to_bits())) == 0)
        }
        Matrix::Mx { .. } => key == b_bits(b).as_slice(),
    }
}

impl OpSubject {
    /// The subject for preset `name` under `knobs`; Err: one line (unknown
    /// preset, a preset that is not a subject, a knob it cannot honour).
    pub fn new(name: &str, knobs: &Knobs) -> Result<OpSubject, String> {
        Self::with_paths(name, None, knobs)
    }

    /// [`OpSubject::new`] with an all-gather-matmul preset's paths replaced
    /// by a [`PathSet`] (`op:PRESET,paths=SET`); other presets refuse one.
    pub fn with_paths(name: &str, paths: Option<&'static PathSet>, knobs: &Knobs) -> Result<OpSubject, String> {
        let mut parts = name.split(';');
        let base = parts.next().unwrap_or_default().trim();
        let overrides: Vec<&str> = parts.collect();
        let p = presets::find(base).map_err(|e| e.to_string())?;
        if let Some(why) = not_a_subject(p.name) {
            return Err(format!(
                "op:{name} is not a subject: {why}; subjects: {}",
                subject_presets().join(", ")
            ));
        }
        if p.name.starts_with("mmrs-") || p.name.starts_with("mmar-") {
            if let Some(set) = paths {
                return Err(format!(
                    "op:{name}: paths={} applies to all-gather-matmul presets only",
                    set.name
                ));
            }
            return Ok(OpSubject {
                preset: p.name,
                paths: None,
                label: None,
                world_size: 0,
                x1: ScaleKind::Identity,
                x2: ScaleKind::Identity,
                kind: Kind::Reduce(Box::new(ReduceSubject::new(p, &overrides, knobs)?)),
                codes: Vec::new(),
            });
        }
        if !overrides.is_empty() {
            return Err(format!(
                "op:{name}: only the reduce presets (mmrs-*, mmar-*) take ;KEY=VALUE overrides"
            ));
        }
        let mut value = serde_json::json!({ "preset": p.name });
        if let Some(set) = paths {
            if !p.name.starts_with("agmm-") {
                return Err(format!(
                    "op:{name}: paths={} applies to all-gather-matmul presets only",
                    set.name
                ));
            }
            let mut t = (p.template)();
            set.apply(&mut t).map_err(|e| format!("op:{name}: {e}"))?;
            for key in ["local", "gather"] {
                value[key] = t[key].clone();
            }
        }
        let spec = OpSpec::from_value(value).map_err(|e| e.to_string())?;
        match spec {
            OpSpec::AllGatherMatmul(s) => {
                let sizes = p.world.map_or(&[][..], |w| w.1);
                let ws = knobs.world_size.unwrap_or(s.world_size);
                if !sizes.contains(&ws) {
                    return Err(format!(
                        "op:{name} does not support world size {ws}; supported: {}",
                        sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
                    ));
                }
                let fmt = s
                    .mx_format
                    .ok_or_else(|| format!("op:{name}: only MX all-gather-matmul presets are subjects"))?;
                let el = fmt.element();
                let mut codes = vec![-1i16; 1 << 12];
                for c in (0..el.code_count() as u16).filter(|&c| el.decode_f32(c).is_finite()) {
                    let bits = el.decode_f32(c).to_bits();
                    assert_eq!(bits & 0xF_FFFF, 0, "an 8-bit element value has few mantissa bits");
                    codes[(bits >> 20) as usize] = c as i16;
                }
                Ok(OpSubject {
                    preset: p.name,
                    paths,
                    label: None,
                    world_size: ws,
                    x1: knobs.x1_scales.unwrap_or(ScaleKind::Identity),
                    x2: knobs.x2_scales.unwrap_or(ScaleKind::Identity),
                    kind: Kind::Agmm(Box::new(s)),
                    codes,
                })
            }
            OpSpec::QuantMatmul(s) => {
                knobs.refuse_any(
                    &format!("op:{name}"),
                    "a one-device op on f32 values (no world size, MX scales or communication)",
                )?;
                Ok(OpSubject {
                    preset: p.name,
                    paths: None,
                    label: None,
                    world_size: 1,
                    x1: ScaleKind::Identity,
                    x2: ScaleKind::Identity,
                    kind: Kind::Quant(Box::new(s)),
                    codes: Vec::new(),
                })
            }
            _ => Err(format!("op:{name} is not a subject")),
        }
    }

    /// The same subject reported under `name` (the spec as written, when it
    /// set options such as `x2=VAR`).
    pub fn labelled(mut self, name: String) -> OpSubject {
        self.label = Some(name);
        self
    }

    fn unsupported(&self, why: impl Into<String>) -> SubjectError {
        SubjectError::Unsupported {
            subject: self.name(),
            why: why.into(),
        }
    }

    fn op_err(&self, e: super::OpError) -> SubjectError {
        self.unsupported(e.to_string())
    }

    /// An f32 matrix as MX codes (Unsupported when a value is not exact).
    fn to_codes(&self, what: &str, v: &[f32], el: &str) -> Result<Vec<u8>, SubjectError> {
        v.iter()
            .enumerate()
            .map(|(i, x)| {
                let b = x.to_bits();
                match self.codes.get((b >> 20) as usize) {
                    Some(&c) if c >= 0 && b & 0xF_FFFF == 0 => Ok(c as u8),
                    _ => Err(self.unsupported(format!("{what}[{i}] = {x:e} is not exactly representable in {el}"))),
                }
            })
            .collect()
    }

    /// x2 (codes and scales) and both paths' preparations, cached per B.
    fn prepared_b(&self, spec: &AgmmSpec, fmt: MxFormat, p: &Problem) -> Result<Arc<PreparedB>, SubjectError> {
        let (k, n) = (spec.k, spec.n);
        let nk = p.b_layout == BLayout::Nk;
        let shared = shared_cache(self.preset, self.paths.map(|s| s.name), self.x2);
        {
            let entries = shared.lock().expect("cache lock");
            if let Some(c) = entries
                .iter()
                .find(|c| (c.key.1, c.key.2, c.key.3) == (k, n, nk) && same_b(&c.key.0, &p.b))
            {
                return Ok(c.clone());
            }
        }
        let key = (b_bits(&p.b), k, n, nk);
        let kb = k / MX_BLOCK;
        let (c2, s2) = match p.b {
            Matrix::Mx { codes, scales, .. } => (codes.to_vec(), scales.to_vec()),
            Matrix::F32(b) => {
                let c2 = self.to_codes("B", b, fmt.element().name())?;
                // scale of (K-block kb, column j) from that block's 32 values
                let block = |kb: usize, j: usize| -> u8 {
                    match self.x2 {
                        ScaleKind::Identity => 127,
                        ScaleKind::Varying => {
                            let mut h = 0x5EED_0000_0000_0002u64 ^ kb as u64;
                            for kk in kb * MX_BLOCK..(kb + 1) * MX_BLOCK {
                                h = mix(h ^ b[p.b_index(kk, j)].to_bits() as u64);
                            }
                            (121 + (h % 9)) as u8
                        }
                    }
                };
                let s2: Vec<u8> = if nk {
                    (0..n * kb).map(|i| block(i % kb, i / kb)).collect()
                } else {
                    (0..kb * n).map(|i| block(i / n, i % n)).collect()
                };
                (c2, s2)
            }
        };
        let ops = Operands {
            x1: &[],
            x2: &[],
            c1: &[],
            s1: &[],
            c2: &c2,
            s2: &s2,
        };
        let local = agmm::prepare(spec, &spec.local, &ops).map_err(|e| self.op_err(e))?;
        let gather = match &spec.gather {
            Some(g) => Some(agmm::prepare(spec, g, &ops).map_err(|e| self.op_err(e))?),
            None => None,
        };
        let pb = Arc::new(PreparedB {
            key,
            c2,
            s2,
            local,
            gather,
            rows: Mutex::new(HashMap::new()),
        });
        let mut entries = shared.lock().expect("cache lock");
        if entries.len() >= SHARED_BS {
            entries.remove(0);
        }
        entries.push(pb.clone());
        Ok(pb)
    }

    /// The job's spec (M sharded over the world size) and MX format.
    fn agmm_spec(&self, template: &AgmmSpec, p: &Problem) -> Result<(AgmmSpec, MxFormat), SubjectError> {
        let (m, k, n, ws) = (p.m, p.k, p.n, self.world_size);
        if !m.is_multiple_of(ws) {
            return Err(self.unsupported(format!("M = {m} is not divisible by the world size {ws}")));
        }
        let spec = AgmmSpec {
            world_size: ws,
            m_per_rank: m / ws,
            k,
            n,
            x2_layout: match p.b_layout {
                BLayout::Kn => agmm::X2Layout::Kn,
                BLayout::Nk => agmm::X2Layout::Nk,
            },
            ..template.clone()
        };
        spec.validate().map_err(|e| self.op_err(e))?;
        let fmt = spec.mx_format.expect("MX presets only");
        let mx_given = matches!(p.a, Matrix::Mx { .. }) || matches!(p.b, Matrix::Mx { .. });
        if mx_given {
            let ok = |x: &Matrix| matches!(x, Matrix::Mx { format, .. } if *format == fmt);
            if !ok(&p.a) || !ok(&p.b) {
                return Err(self.unsupported(format!("MX operands must both be {fmt:?}")));
            }
        }
        Ok((spec, fmt))
    }

    /// x1 as MX codes `[M, K]` and scales `[M, K/32]`, filled for the rows
    /// `need` only (the others: code 0, scale 2^0).
    fn x1_codes(&self, p: &Problem, fmt: MxFormat, need: &[usize]) -> Result<(Vec<u8>, Vec<u8>), SubjectError> {
        let (m, k) = (p.m, p.k);
        let kb = k / MX_BLOCK;
        let mut c1 = vec![0u8; m * k];
        let mut s1 = vec![127u8; m * kb];
        match p.a {
            Matrix::Mx { codes, scales, .. } => {
                for &g in need {
                    c1[g * k..(g + 1) * k].copy_from_slice(&codes[g * k..(g + 1) * k]);
                    s1[g * kb..(g + 1) * kb].copy_from_slice(&scales[g * kb..(g + 1) * kb]);
                }
            }
            Matrix::F32(a) => {
                for &g in need {
                    let row = &a[g * k..(g + 1) * k];
                    c1[g * k..(g + 1) * k].copy_from_slice(&self.to_codes("A", row, fmt.element().name())?);
                    if self.x1 == ScaleKind::Varying {
                        for b in 0..kb {
                            let mut h = 0x5EED_0000_0000_0001u64 ^ b as u64;
                            for x in &row[b * MX_BLOCK..(b + 1) * MX_BLOCK] {
                                h = mix(h ^ x.to_bits() as u64);
                            }
                            s1[g * kb + b] = (124 + (h % 7)) as u8;
                        }
                    }
                }
            }
        }
        Ok((c1, s1))
    }

    /// The whole job as the all-gather-matmul op reads it: its spec and
    /// every row's x1 codes and scales, x2's codes and scales (the same
    /// bytes the model computes from), for a runner of the op elsewhere
    /// (the NCCL subject on GPUs). Unsupported for other presets.
    pub fn agmm_job(&self, p: &Problem) -> Result<AgmmJob, SubjectError> {
        let Kind::Agmm(template) = &self.kind else {
            return Err(self.unsupported("not an all-gather-matmul preset"));
        };
        let (spec, fmt) = self.agmm_spec(template, p)?;
        let pb = self.prepared_b(&spec, fmt, p)?;
        let all: Vec<usize> = (0..p.m).collect();
        let (c1, s1) = self.x1_codes(p, fmt, &all)?;
        Ok(AgmmJob {
            spec,
            c1,
            s1,
            c2: pb.c2.clone(),
            s2: pb.s2.clone(),
        })
    }

    /// The job as the op itself reads it: the op spec (M rows sharded or
    /// chunked over the ranks as [`Subject::run_on_rank`] does) and its
    /// inputs in the op's own bytes (all-gather-matmul: the codes and
    /// scales of [`OpSubject::agmm_job`]; reduce and quant ops: the f32
    /// values, B as `[K, N]`). `crate::op::run_op` on it gives the same
    /// rows as the subject, with their provenance records.
    pub fn op_job(&self, p: &Problem) -> Result<(OpSpec, Inputs), SubjectError> {
        let mut inp = Inputs::default();
        let f32_of = |x: &Matrix, what: &str| match x {
            Matrix::F32(v) => Ok(v.to_vec()),
            Matrix::Mx { .. } => Err(self.unsupported(format!("{what}: expected f32 values, got MX codes"))),
        };
        // B as [K, N]
        let b_kn = |b: Vec<f32>| match p.b_layout {
            BLayout::Kn => b,
            BLayout::Nk => (0..p.k * p.n).map(|i| b[p.b_index(i / p.n, i % p.n)]).collect(),
        };
        let spec = match &self.kind {
            Kind::Agmm(_) => {
                let j = self.agmm_job(p)?;
                for (name, shape, _) in j.spec.input_shapes() {
                    let v = match name.as_str() {
                        "x1" => &j.c1,
                        "x2" => &j.c2,
                        "x1_scales" => &j.s1,
                        _ => &j.s2,
                    };
                    inp.insert(&name, Tensor::u8(shape, v.clone()));
                }
                OpSpec::AllGatherMatmul(j.spec)
            }
            Kind::Reduce(r) => {
                let spec = r.op_spec(p.m, p.k, p.n);
                inp.insert("x1", Tensor::f32(vec![p.m, p.k], f32_of(&p.a, "A")?));
                inp.insert("x2", Tensor::f32(vec![p.k, p.n], b_kn(f32_of(&p.b, "B")?)));
                spec
            }
            Kind::Quant(t) => {
                let spec = QuantSpec {
                    m: p.m,
                    k: p.k,
                    n: p.n,
                    ..(**t).clone()
                };
                inp.insert("x", Tensor::f32(vec![p.m, p.k], f32_of(&p.a, "A")?));
                inp.insert("w", Tensor::f32(vec![p.k, p.n], b_kn(f32_of(&p.b, "B")?)));
                OpSpec::QuantMatmul(spec)
            }
        };
        spec.validate().map_err(|e| self.op_err(e))?;
        Ok((spec, inp))
    }

    fn run_agmm(
        &self,
        template: &AgmmSpec,
        p: &Problem,
        rank: usize,
        rows: &[usize],
    ) -> Result<Vec<f32>, SubjectError> {
        let (m, n, ws) = (p.m, p.n, self.world_size);
        if rank >= ws {
            return Err(self.unsupported(format!("rank {rank} of world size {ws}")));
        }
        let (spec, fmt) = self.agmm_spec(template, p)?;
        if let Some(&g) = rows.iter().find(|&&g| g >= m) {
            return Err(self.unsupported(format!("row {g} is out of range (M = {m})")));
        }
        let pb = self.prepared_b(&spec, fmt, p)?;
        // the rows of x1 the paths read: the requested rows, and for a path
        // that re-rounds x1 the scales of their shards
        let coupled = spec.local.x1_requant.is_some() || spec.gather.as_ref().is_some_and(|g| g.x1_requant.is_some());
        let mpr = spec.m_per_rank;
        let mut need_scales: Vec<usize> = rows.to_vec();
        if coupled {
            for &g in rows {
                need_scales.extend((g / mpr) * mpr..(g / mpr + 1) * mpr);
            }
        }
        need_scales.sort_unstable();
        need_scales.dedup();
        let (c1, s1) = self.x1_codes(p, fmt, &need_scales)?;
        let ops = Operands {
            x1: &[],
            x2: &[],
            c1: &c1,
            s1: &s1,
            c2: &pb.c2,
            s2: &pb.s2,
        };
        // each row as its path reads it; computed once per distinct key
        let mut out = Vec::with_capacity(rows.len() * n);
        let mut missing: Vec<(usize, RowKey)> = Vec::new();
        let mut keys = Vec::with_capacity(rows.len());
        for (ri, &g) in rows.iter().enumerate() {
            let (is_local, path) = spec.path_for(rank, g);
            let (c, sc) = agmm::x1_rows(&spec, path, &ops, &[g]).map_err(|e| self.op_err(e))?;
            let key: RowKey = (is_local, c, sc);
            if !pb.rows.lock().expect("memo lock").contains_key(&key) && !missing.iter().any(|(_, k)| *k == key) {
                missing.push((ri, key.clone()));
            }
            keys.push(key);
        }
        for local in [true, false] {
            let group: Vec<&RowKey> = missing.iter().map(|(_, k)| k).filter(|k| k.0 == local).collect();
            if group.is_empty() {
                continue;
            }
            let pr = if local {
                &pb.local
            } else {
                pb.gather.as_ref().unwrap_or(&pb.local)
            };
            let c1: Vec<u8> = group.iter().flat_map(|k| k.1.iter().copied()).collect();
            let s1: Vec<u8> = group.iter().flat_map(|k| k.2.iter().copied()).collect();
            let y = agmm::eval_x1(&spec, pr, &ops, &c1, &s1).map_err(|e| self.op_err(e))?;
            let mut memo = pb.rows.lock().expect("memo lock");
            if memo.len() + group.len() > MEMO_ROWS {
                memo.clear();
            }
            for (i, k) in group.iter().enumerate() {
                memo.insert((*k).clone(), Arc::new(y[i * n..(i + 1) * n].to_vec()));
            }
        }
        let memo = pb.rows.lock().expect("memo lock");
        for key in &keys {
            match memo.get(key) {
                Some(row) => out.extend_from_slice(row),
                None => {
                    // evicted by a concurrent caller: compute it alone
                    drop(memo);
                    return self.run_agmm_uncached(&spec, &pb, &ops, rank, rows);
                }
            }
        }
        Ok(out)
    }

    /// The rows without the memo (used only if the memo was cleared
    /// between computing and reading).
    fn run_agmm_uncached(
        &self,
        spec: &AgmmSpec,
        pb: &PreparedB,
        ops: &Operands,
        rank: usize,
        rows: &[usize],
    ) -> Result<Vec<f32>, SubjectError> {
        let n = spec.n;
        let mut out = Vec::with_capacity(rows.len() * n);
        for &g in rows {
            let (is_local, path) = spec.path_for(rank, g);
            let pr = if is_local {
                &pb.local
            } else {
                pb.gather.as_ref().unwrap_or(&pb.local)
            };
            out.extend(agmm::eval_rows(spec, path, pr, ops, &[g]).map_err(|e| self.op_err(e))?);
        }
        Ok(out)
    }

    fn run_quant(&self, template: &QuantSpec, p: &Problem, rows: &[usize]) -> Result<Vec<f32>, SubjectError> {
        let (m, k, n) = (p.m, p.k, p.n);
        let (Matrix::F32(a), Matrix::F32(b)) = (p.a, p.b) else {
            return Err(self.unsupported("quant-matmul takes f32 values, not MX codes"));
        };
        if p.b_layout != BLayout::Kn {
            return Err(self.unsupported("quant-matmul takes B as [K, N] (kn)"));
        }
        if let Some(&g) = rows.iter().find(|&&g| g >= m) {
            return Err(self.unsupported(format!("row {g} is out of range (M = {m})")));
        }
        let spec = QuantSpec {
            m,
            k,
            n,
            ..template.clone()
        };
        spec.validate().map_err(|e| self.op_err(e))?;
        // the quantization reads the whole activation (that is the coupling);
        // the GEMM runs on the requested rows only
        let (xq, _) = quantize_activation(&spec, a).map_err(|e| self.op_err(e))?;
        let sel: Vec<f32> = rows
            .iter()
            .flat_map(|&g| xq[g * k..(g + 1) * k].iter().copied())
            .collect();
        let order = parse_order("order", &spec.order).map_err(|e| self.op_err(e))?;
        matmul_values(&order, &sel, b, rows.len(), k, n).map_err(|e| self.op_err(e))
    }
}

fn mix(h: u64) -> u64 {
    SplitMix64::new(h).next_u64()
}

impl Subject for OpSubject {
    fn name(&self) -> String {
        if let Some(l) = &self.label {
            return l.clone();
        }
        match (&self.kind, self.paths) {
            (Kind::Reduce(r), _) => r.name(),
            (_, Some(s)) => format!("op:{},paths={}", self.preset, s.name),
            _ => format!("op:{}", self.preset),
        }
    }

    /// Rank 0's copy; for reduce-scatter each row as the rank holding it
    /// has it (`src/op/reduce_subject.rs`).
    fn run(&self, problem: &Problem, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        if let Kind::Reduce(r) = &self.kind {
            let all: Vec<usize> = (0..problem.m).collect();
            return r.run_rows(problem, None, rows.unwrap_or(&all));
        }
        self.run_on_rank(problem, 0, rows)
    }

    fn world_size(&self) -> usize {
        match &self.kind {
            Kind::Reduce(r) => r.world_size(),
            _ => self.world_size,
        }
    }

    fn run_on_rank(&self, problem: &Problem, rank: usize, rows: Option<&[usize]>) -> Result<Vec<f32>, SubjectError> {
        let all: Vec<usize> = (0..problem.m).collect();
        let rows = rows.unwrap_or(&all);
        match &self.kind {
            Kind::Agmm(s) => self.run_agmm(s, problem, rank, rows),
            Kind::Quant(s) if rank == 0 => self.run_quant(s, problem, rows),
            Kind::Quant(_) => Err(self.unsupported(format!("rank {rank} of a one-device op"))),
            Kind::Reduce(r) => r.run_rows(problem, Some(rank), rows),
        }
    }

    /// M values where the op's behaviour changes: quant-mx-m's 32-row MX
    /// blocks along M. The all-gather presets' orders and paths do not
    /// depend on M (a row's path depends on its shard, i.e. its position).
    fn m_boundaries(&self) -> Vec<usize> {
        match &self.kind {
            Kind::Quant(s) if s.quant == super::coupling::DynQuant::MxM => vec![32],
            _ => Vec::new(),
        }
    }

    fn input(&self) -> Option<InType> {
        match &self.kind {
            Kind::Agmm(s) => s
                .mx_format
                .map(|f| InType::of_format(f.element()).unwrap_or(InType::E4M3)),
            Kind::Quant(_) => Some(InType::F32),
            Kind::Reduce(r) => Some(r.input()),
        }
    }
}
