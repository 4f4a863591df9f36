//! The committed `vendor` capture read back for the capture tests: the
//! anchor rows cuBLAS returned (case, K, M, every position) and the vendor
//! suite's own inputs regenerated from the capture's seed, values widened
//! to f32, with the CPU model's anchor row under an order.

use super::committed_capture;
use mxbi::device::capture::Capture;
use mxbi::device::vendor::{self, CaseId, RowStatus, Variant, VendorReport};
use mxbi::gemm::{gemm, BLayout, Matrix, Problem};
use mxbi::order::InType;
use mxbi::order::Order;

/// Little-endian f32 values.
pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

/// Little-endian values of `d` widened to f32 (bf16: the high half).
/// Panics on the other types, which the capture tests never widen.
pub fn widen(d: InType, bytes: &[u8]) -> Vec<f32> {
    match d {
        InType::F32 => f32s(bytes),
        InType::Bf16 => bytes
            .chunks_exact(2)
            .map(|b| f32::from_bits((u16::from_le_bytes(b.try_into().unwrap()) as u32) << 16))
            .collect(),
        other => panic!("{} values are not widened here", other.name()),
    }
}

/// How many elements of two rows of equal length differ in their bits.
pub fn differing(a: &[f32], b: &[f32]) -> usize {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).filter(|(x, y)| x.to_bits() != y.to_bits()).count()
}

/// The anchored `vendor` capture: its report and its rows (`rows.bin`).
pub struct VendorCapture {
    pub report: VendorReport,
    pub data: Vec<u8>,
}

/// A vendor case's inputs at one K as a one-row problem's operands: the
/// anchor row `[1, K]` and the weights `W[N, K]` (Y = X Wᵀ, so B is `nk`),
/// values widened to f32.
pub struct Operands {
    pub k: usize,
    pub n: usize,
    pub anchor: Vec<f32>,
    pub weights: Vec<f32>,
}

impl VendorCapture {
    /// Opens the committed capture, checked against its anchor.
    pub fn open() -> VendorCapture {
        let c = Capture::open_anchored(&committed_capture("vendor")).expect("anchored vendor capture");
        VendorCapture {
            report: c.read_json("report.json").unwrap(),
            data: c.read("rows.bin").unwrap(),
        }
    }

    /// The inputs of `case` at K (N as the suite's shape of that K says),
    /// regenerated from the capture's seed.
    pub fn inputs(&self, case: CaseId, k: usize) -> Operands {
        let shape = self
            .report
            .options
            .shapes
            .iter()
            .find(|s| s.k == k)
            .expect("shape in the vendor capture");
        let seed = self.report.options.seed;
        let d = case.input();
        Operands {
            k,
            n: shape.n,
            anchor: widen(d, &vendor::anchor(d, shape, seed)),
            weights: widen(d, &vendor::weights(d, shape, seed)),
        }
    }

    /// The captured anchor rows of `case` (heuristic variant, status ok) at
    /// N = 2048, K and M, one per position, widened to f32; possibly none.
    pub fn rows(&self, case: CaseId, k: usize, m: usize) -> Vec<(String, Vec<f32>)> {
        let shape = format!("n2048-k{k}");
        self.report
            .rows
            .iter()
            .filter(|e| {
                e.case == case
                    && e.variant == Variant::Heuristic
                    && e.shape == shape
                    && e.m == m
                    && e.status == RowStatus::Ok
            })
            .map(|e| {
                let (o, b) = (e.offset.unwrap() as usize, e.bytes.unwrap() as usize);
                (e.position.clone(), widen(case.output(), &self.data[o..o + b]))
            })
            .collect()
    }

    /// [`rows`](Self::rows), asserting there is at least one.
    pub fn some_rows(&self, case: CaseId, k: usize, m: usize) -> Vec<(String, Vec<f32>)> {
        let rows = self.rows(case, k, m);
        assert!(!rows.is_empty(), "{case:?} K = {k} M = {m}: no captured rows");
        rows
    }
}

impl Operands {
    /// The one-row problem `anchor x Wᵀ`.
    pub fn problem(&self) -> Problem<'_> {
        Problem {
            a: Matrix::F32(&self.anchor),
            b: Matrix::F32(&self.weights),
            m: 1,
            n: self.n,
            k: self.k,
            b_layout: BLayout::Nk,
        }
    }

    /// The CPU model's anchor row under `order`.
    pub fn row(&self, order: &Order) -> Vec<f32> {
        gemm(order, &self.problem(), None).unwrap()
    }

    /// [`row`](Self::row) of an order written as text.
    pub fn order_row(&self, spec: &str) -> Vec<f32> {
        self.row(&spec.parse().unwrap_or_else(|e| panic!("{spec}: {e}")))
    }
}
