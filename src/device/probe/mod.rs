//! Tensor-core instruction probes: random dot products run through single
//! `mma.sync` / `wgmma` instructions on the GPU and through the CPU step
//! model [`mma_step`] (contract: docs/ORDERS.md, "The fused sum"), compared
//! bit for bit.
//!
//! # Cases
//!
//! A probe runs `tiles` tiles. A tile is one instruction's operands: A
//! (`rows x k`, rows = 16 for `mma.sync`, 64 for `wgmma`), B (`k x 8`) and
//! C (`rows x 8`, f32). Output element (r, n) of tile t is case
//! `t * rows * 8 + r * 8 + n`: the dot product of row r of A with column n
//! of B plus `C[r][n]`, one instruction, so the GPU result must equal
//! `mma_step(model, A[r,:], B[:,n], C[r][n])`. Tile t is generated from
//! `SplitMix64::for_item(seed, t)` alone, so any thread count (and the CPU
//! replay) regenerates the same bytes. Tile classes (wide exponent spread
//! with subnormals and zeros, narrow spread, exact and near cancellation in
//! pairs, specials NaN/Inf/Inf x 0, overflow) and per-case C classes (+0,
//! -0, subnormal, random, cancelling the products, dominant, special, huge)
//! are mixed; every input is a code of the instruction's type.
//!
//! # Comparison, NaN and the digest
//!
//! GPU and model outputs match when their bits are equal, or both are NaN
//! (the model gives the fused sum's canonical NaN, docs/ORDERS.md "The
//! fused sum"; the payload the hardware writes is recorded separately, per
//! probe, as `nan_payloads`). The capture's `digest` is SHA-256 of the GPU
//! outputs' little-endian bits in case order with every NaN replaced by
//! 0x7FFFFFFF (canonical NaN), so a replay on the model reproduces it
//! exactly when every case matches; with recorded mismatches, the replay
//! substitutes the recorded GPU bits. The first [`FIRST_OUTPUTS`] GPU
//! outputs are stored raw (payloads kept).
//!
//! # Capture layout (`DIR/probe/`)
//!
//! `manifest.json` (suite `probe`, device JSON), `probes.json` (one
//! [`ProbeRecord`] per probe), and per probe `NAME.first.bin` (raw LE f32
//! bits) and `NAME.mismatches.json` (up to [`MAX_RECORDS`]
//! [`MismatchRecord`]s, lowest case indices first).

use super::capture::{canonical_bits, f32_digest, Capture, CaptureWriter, Manifest};
use super::{DeviceError, Result};
use crate::format::{Format, MiniFloat};
use crate::gemm::mma_step::mma_step;
use crate::order::{CMode, InType, Mma, MmaSplit};
use crate::rng::SplitMix64;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

mod capture;
mod cases;
mod compare;
mod kernel;
mod replay;
mod report;

/// The suite name of probe captures (`manifest.json`).
pub const SUITE: &str = "probe";

pub use capture::*;
pub use cases::*;
pub use compare::*;
pub use kernel::*;
pub use replay::*;
pub use report::*;

/// Output columns of every probed instruction (n = 8).
pub const COLS: usize = 8;
/// Bytes of one row of A (and of one column of B): k16 x 2 bytes or k32 x 1.
pub const ROW_BYTES: usize = 32;
/// Raw GPU outputs stored per probe.
pub const FIRST_OUTPUTS: usize = 4096;
/// Mismatch records kept per probe.
pub const MAX_RECORDS: usize = 256;
/// Default number of cases per probe (2^20 >= 10^6).
pub const DEFAULT_CASES: usize = 1 << 20;
/// `--quick`.
pub const QUICK_CASES: usize = 1 << 14;
/// Largest accepted case count per probe.
pub const MAX_CASES: usize = 1 << 26;
/// Default seed ("mxbiprob").
pub const DEFAULT_SEED: u64 = 0x6D78_6269_7072_6F62;

/// Which instruction family a probe drives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Instr {
    /// `mma.sync.aligned.m16n8kK.row.col.f32.T.T.f32`, one warp per tile.
    MmaSync,
    /// `wgmma.mma_async.sync.aligned.m64n8kK.f32.T.T`, A from registers, B
    /// from shared memory (no swizzle), one warpgroup per tile.
    Wgmma,
}

/// One probed instruction and its CPU model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeSpec {
    pub name: &'static str,
    pub instr: Instr,
    /// Rows of A and D per tile (16 or 64).
    pub rows: usize,
    /// The model, as an order spelling (docs/ORDERS.md).
    pub order: &'static str,
    /// The model.
    pub mma: Mma,
    /// The PTX instruction (without operands).
    pub ptx: &'static str,
    /// CUDA kernel name.
    pub kernel: &'static str,
}

const fn mma(k: u32, f: u32, out: u32, split: MmaSplit, c: CMode, input: InType) -> Mma {
    Mma {
        k,
        f,
        out,
        split,
        c,
        input,
    }
}

/// Every probe, in run order.
pub const PROBES: &[ProbeSpec] = &[
    ProbeSpec {
        name: "mma.sync.m16n8k16.bf16",
        instr: Instr::MmaSync,
        rows: 16,
        order: "hopper-bf16",
        mma: mma(16, 25, 23, MmaSplit::None, CMode::Fused, InType::Bf16),
        ptx: "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
        kernel: "probe_mma_sync_bf16",
    },
    ProbeSpec {
        name: "mma.sync.m16n8k16.f16",
        instr: Instr::MmaSync,
        rows: 16,
        order: "hopper-f16",
        mma: mma(16, 25, 23, MmaSplit::None, CMode::Fused, InType::F16),
        ptx: "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        kernel: "probe_mma_sync_f16",
    },
    ProbeSpec {
        name: "mma.sync.m16n8k32.e4m3",
        instr: Instr::MmaSync,
        rows: 16,
        order: "hopper-fp8-mma-sync",
        mma: mma(32, 25, 23, MmaSplit::Mod4, CMode::Late, InType::E4M3),
        ptx: "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32",
        kernel: "probe_mma_sync_e4m3",
    },
    ProbeSpec {
        name: "mma.sync.m16n8k32.e5m2",
        instr: Instr::MmaSync,
        rows: 16,
        order: "mma(k=32,f=25,split=mod4,c=late,in=e5m2)",
        mma: mma(32, 25, 23, MmaSplit::Mod4, CMode::Late, InType::E5M2),
        ptx: "mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e5m2.f32",
        kernel: "probe_mma_sync_e5m2",
    },
    ProbeSpec {
        name: "wgmma.m64n8k16.bf16",
        instr: Instr::Wgmma,
        rows: 64,
        order: "hopper-bf16",
        mma: mma(16, 25, 23, MmaSplit::None, CMode::Fused, InType::Bf16),
        ptx: "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16",
        kernel: "probe_wgmma_bf16",
    },
    ProbeSpec {
        name: "wgmma.m64n8k32.e4m3",
        instr: Instr::Wgmma,
        rows: 64,
        order: "hopper-fp8-wgmma",
        mma: mma(32, 13, 13, MmaSplit::None, CMode::Fused, InType::E4M3),
        ptx: "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3",
        kernel: "probe_wgmma_e4m3",
    },
    ProbeSpec {
        name: "wgmma.m64n8k32.e5m2",
        instr: Instr::Wgmma,
        rows: 64,
        order: "mma(k=32,f=13,out=13,in=e5m2)",
        mma: mma(32, 13, 13, MmaSplit::None, CMode::Fused, InType::E5M2),
        ptx: "wgmma.mma_async.sync.aligned.m64n8k32.f32.e5m2.e5m2",
        kernel: "probe_wgmma_e5m2",
    },
];

/// The probe called `name`.
pub fn find(name: &str) -> Option<&'static ProbeSpec> {
    PROBES.iter().find(|p| p.name == name)
}

impl ProbeSpec {
    pub fn k(&self) -> usize {
        self.mma.k as usize
    }
    /// Cases (output elements) per tile.
    pub fn tile_cases(&self) -> usize {
        self.rows * COLS
    }
    /// The element format of the instruction's inputs (every probed
    /// instruction reads a narrow type; the tests check the table).
    pub fn format(&self) -> Format {
        self.mma.input.format().expect("a probe reads a narrow input type")
    }
    /// The input type's parameters.
    pub fn params(&self) -> MiniFloat {
        self.mma.input.params().expect("a probe reads a narrow input type")
    }
    /// Bytes per element code (2 for bf16/f16, 1 for fp8).
    pub fn elem_bytes(&self) -> usize {
        self.mma.input.bytes()
    }
    /// Tiles needed for at least `cases` cases.
    pub fn tiles_for(&self, cases: usize) -> usize {
        cases.div_ceil(self.tile_cases()).max(1)
    }
}

/// Options of a GPU probe run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    pub cases: usize,
    pub seed: u64,
    /// Probe names; empty = all.
    pub only: Vec<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            cases: DEFAULT_CASES,
            seed: DEFAULT_SEED,
            only: Vec::new(),
        }
    }
}

/// The probes selected by `only` (all when empty); unknown names are an
/// error listing the known ones.
pub fn select(only: &[String]) -> Result<Vec<&'static ProbeSpec>> {
    if only.is_empty() {
        return Ok(PROBES.iter().collect());
    }
    only.iter()
        .map(|n| {
            find(n.trim()).ok_or_else(|| {
                let known: Vec<&str> = PROBES.iter().map(|p| p.name).collect();
                DeviceError::Refused(format!("unknown probe `{n}`; known: {}", known.join(", ")))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_models_match_their_order_spelling() {
        for p in PROBES {
            let o: crate::order::Order = p.order.parse().unwrap();
            assert_eq!(o.mma(), Some(p.mma), "{}", p.name);
            assert_eq!(p.k() * p.elem_bytes(), ROW_BYTES, "{}", p.name);
        }
    }

    #[test]
    fn generated_inputs_are_codes_of_the_type_and_deterministic() {
        for p in PROBES {
            let x = Cases::generate(p, 7, 100_000).unwrap();
            let y = Cases::generate(p, 7, 100_000).unwrap();
            assert_eq!(x.a, y.a);
            assert_eq!(x.b, y.b);
            assert_eq!(
                x.c.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                y.c.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
            let mask = (p.format().code_count() - 1) as u16;
            assert!(x.a.iter().chain(&x.b).all(|&c| c & !mask == 0), "{}", p.name);
            // every class appears
            for t in 0..5u8 {
                assert!(x.tile_class.contains(&t), "{} tile class {t}", p.name);
            }
            let m = x.model();
            let nans = m.iter().filter(|v| v.is_nan()).count();
            assert!(nans > 0 && nans * 10 < m.len(), "{}: {nans} NaN of {}", p.name, m.len());
        }
    }

    #[test]
    fn layout_check_expectations_are_the_designed_values() {
        for p in PROBES {
            let c = Cases::layout_check(p);
            let m = c.model();
            let table = decode_table(p.format());
            let (k, rows) = (p.k(), p.rows);
            let tc = p.tile_cases();
            for r in 0..rows {
                for n in 0..COLS {
                    let bv = |t: usize, kk: usize| table[c.b[(t * COLS + n) * k + kk] as usize];
                    let av = |t: usize, kk: usize| table[c.a[(t * rows + r) * k + kk] as usize];
                    let o = |t: usize| m[t * tc + r * COLS + n];
                    assert_eq!(o(0), bv(0, r % k), "{} T0", p.name);
                    assert_eq!(o(1), bv(1, (r + k / 2) % k), "{} T1", p.name);
                    assert_eq!(o(2), av(2, n), "{} T2", p.name);
                    assert_eq!(o(3), av(3, n + k - 8), "{} T3", p.name);
                    assert_eq!(o(4), (r * COLS + n + 1) as f32, "{} T4", p.name);
                }
            }
            let fake = m.clone();
            assert!(layout_report(&c, &fake, &m).is_none());
            // a transposed-fragment style error is reported with positions
            let mut bad = m.clone();
            bad.swap(1, 2);
            let rep = layout_report(&c, &bad, &m).unwrap();
            assert!(rep.contains("check tile 0") && rep.contains("expected at"), "{rep}");
        }
    }

    #[test]
    fn kernel_sources_name_their_instruction() {
        for p in PROBES {
            let s = kernel_source(p);
            assert!(s.contains(p.ptx) && s.contains(p.kernel));
            assert_eq!(s.matches('{').count(), s.matches('}').count(), "{}", p.name);
        }
    }

    #[test]
    fn select_rejects_unknown_names() {
        assert_eq!(select(&[]).unwrap().len(), PROBES.len());
        assert!(select(&["nope".into()]).is_err());
        assert_eq!(select(&["wgmma.m64n8k16.bf16".into()]).unwrap()[0].rows, 64);
    }
}
