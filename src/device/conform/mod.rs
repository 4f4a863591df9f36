//! Order conformance: random orders × shapes × inputs, run as generated
//! CUDA kernels (`codegen`) and as the CPU model (`gemm::gemm`), compared
//! bit for bit. NaN results compare as a class (payloads are counted
//! separately); every other difference is a mismatch, to be fixed in the
//! model, never tolerated.
//!
//! A case is stored as its order, shape, input class and seed; inputs are
//! regenerated from those (SplitMix64), so a capture holds only the GPU's
//! per-row digests and the first mismatching elements.

use super::capture::{canonical_bits, digest64, Capture};
use super::codegen::{Backend16, GpuPlan, TermKind};
use super::{DeviceError, Result};
use crate::gemm::{gemm, BLayout, Matrix, Problem};
use crate::mx::MxFormat;
use crate::order::{Family, InType, Order};
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};

mod capture;
mod cases;
mod compare;
mod replay;
mod report;
#[cfg(feature = "cuda")]
mod run;

/// The suite name of conform captures (`manifest.json`).
pub const SUITE: &str = "conform";

pub use capture::*;
pub use cases::*;
pub use compare::*;
pub use replay::*;
#[cfg(feature = "cuda")]
pub use run::run;

/// The kind of inputs of a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InputClass {
    /// Random sign and significand, exponents over a wide range.
    Wide,
    /// Subnormal inputs and products that land in the f32 subnormal range.
    Tiny,
    /// The second half of K repeats the first with B negated: exact
    /// cancellation whose result depends on the order.
    Cancel,
    /// Wide, but half of the entries are zero (+0 or -0): zero products
    /// must take no part in a tensor-core step's alignment.
    Sparse,
    /// Wide, plus special entries (±0, ±Inf, NaN, extremes; one per 4K
    /// entries, so most outputs stay finite) and,
    /// for MX, extreme and NaN scales.
    Specials,
}

/// One conformance case: everything needed to regenerate it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConformCase {
    pub id: usize,
    /// Canonical order spelling.
    pub order: String,
    /// Kernel for 16-bit `mma(k=16)` steps.
    pub backend16: Backend16,
    pub m: usize,
    pub n: usize,
    pub k: usize,
    /// Element type of A and B (the MX element format when `mx`).
    pub elem: InType,
    /// Inputs are MX (codes + E8M0 scales, blocks of 32 along K).
    pub mx: bool,
    pub class: InputClass,
    pub seed: u64,
}

/// Inputs of a case: f32 values (what the CPU model reads, or the decoded
/// element values) and, for narrow types, the codes the kernel reads.
pub struct CaseInputs {
    pub a: Vec<f32>,
    pub bt: Vec<f32>,
    pub a_codes: Vec<u16>,
    pub bt_codes: Vec<u16>,
    pub sa: Vec<u8>,
    pub sb: Vec<u8>,
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cases_are_deterministic_and_cover_every_fixed_family() {
        let opts = ConformOptions {
            random_cases: 8,
            ..Default::default()
        };
        let a = generate_cases(&opts);
        let b = generate_cases(&opts);
        assert_eq!(a, b);
        assert!(a.len() >= fixed_orders().len());
        let ia = a[3].inputs();
        let ib = b[3].inputs();
        assert_eq!(
            ia.a.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            ib.a.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        for c in &a {
            assert!(c.plan().is_ok(), "{}", c.order);
        }
    }

    #[test]
    fn every_generated_case_discriminates() {
        let opts = ConformOptions {
            seed: 0x5eed_0009,
            random_cases: 12,
            max_terms: 1 << 18,
        };
        let cases = generate_cases(&opts);
        assert!(cases.len() >= fixed_orders().len() + 12, "{} cases", cases.len());
        for c in &cases {
            assert_eq!(screen(c), Ok(()), "case {} `{}`", c.id, c.order);
        }
    }

    #[test]
    fn screen_rejects_all_nan_and_indistinguishable_outputs() {
        let nan = f32::NAN;
        let other_nan = f32::from_bits(0x7FC0_0123);
        // every output NaN: rejected whatever the foils do
        assert_eq!(screen_outputs(&[nan, nan], &[vec![1.0, 2.0]]), Err(Screen::AllNan));
        // foils equal to the order (NaN payloads do not count): rejected
        assert_eq!(
            screen_outputs(&[1.0, nan], &[vec![1.0, other_nan], vec![1.0, nan]]),
            Err(Screen::NoFoilDiffers)
        );
        assert_eq!(screen_outputs(&[1.0, 2.0], &[]), Err(Screen::NoFoilDiffers));
        // -0 vs +0 and one ulp both discriminate
        assert_eq!(screen_outputs(&[0.0, 2.0], &[vec![-0.0, 2.0]]), Ok(()));
        let up = f32::from_bits(2.0f32.to_bits() + 1);
        assert_eq!(screen_outputs(&[1.0, 2.0], &[vec![1.0, 2.0], vec![1.0, up]]), Ok(()));
    }

    #[test]
    fn cancel_class_mirrors_the_first_half() {
        let c = ConformCase {
            id: 0,
            order: "fma".into(),
            backend16: Backend16::MmaSync,
            m: 2,
            n: 3,
            k: 64,
            elem: InType::Bf16,
            mx: false,
            class: InputClass::Cancel,
            seed: 5,
        };
        let x = c.inputs();
        for kk in 0..32 {
            assert_eq!(x.a[kk + 32], x.a[kk]);
            assert_eq!(x.bt[kk + 32], -x.bt[kk]);
        }
        // the exact sum is zero; what remains is the order's rounding error
        let y = c.model(&x, None).unwrap();
        assert_eq!(y.len(), 6);
    }

    #[test]
    fn foils_differ_from_their_order() {
        for s in [
            "fma;split=4",
            "hopper-bf16;lanes=1",
            "hopper-fp8-wgmma",
            "hopper-fp8-mma-sync",
            "fma;lanes=8",
            "deepgemm-fp8",
        ] {
            let o: Order = s.parse().unwrap();
            let f = foils(&o);
            assert!(!f.is_empty(), "{s}");
            assert!(f.iter().all(|x| *x != o), "{s}");
        }
    }

    #[test]
    fn compare_counts_mismatches_nan_payloads_and_unwritten() {
        let c = ConformCase {
            id: 0,
            order: "fma".into(),
            backend16: Backend16::MmaSync,
            m: 1,
            n: 4,
            k: 16,
            elem: InType::F32,
            mx: false,
            class: InputClass::Wide,
            seed: 1,
        };
        let poison = 0x7FBA_DBAD;
        let gpu = [1.0f32, f32::from_bits(0x7FC0_0001), f32::from_bits(poison), 2.0];
        let model = [1.0f32, f32::NAN, 3.0, 2.5];
        let r = compare(&c, &gpu, &model, poison, 0.0);
        assert_eq!((r.mismatches, r.nan_payload_differences, r.unwritten), (1, 1, 1));
        assert_eq!(r.gpu_row_digests.len(), 16);
    }

    #[test]
    fn replay_detects_a_wrong_digest_and_wrong_foil_counts() {
        use crate::device::capture::CaptureWriter;
        let opts = ConformOptions {
            random_cases: 2,
            max_terms: 1 << 16,
            ..Default::default()
        };
        let cases: Vec<ConformCase> = generate_cases(&opts).into_iter().take(3).collect();
        let mut records = Vec::new();
        for c in &cases {
            // a "GPU" that computes the model; foils counted as the GPU run does
            let x = c.inputs();
            let y = c.model(&x, None).unwrap();
            let mut rec = compare(c, &y, &y, 0x7FBA_DBAD, 0.0);
            for foil in foils(&c.parsed_order().unwrap()) {
                let fc = ConformCase {
                    order: foil.to_string(),
                    ..c.clone()
                };
                let fm = fc.model(&x, None).unwrap();
                rec.foils
                    .push((fc.order.clone(), compare(&fc, &y, &fm, 0x7FBA_DBAD, 0.0).mismatches));
            }
            records.push(rec);
        }
        let discriminating = records.iter().position(|r| r.foils.iter().any(|f| f.1 > 0)).unwrap();
        let mut bad = records.clone();
        bad[1].gpu_row_digests.replace_range(0..16, "0123456789abcdef");
        let mut count = records.clone();
        count[discriminating].foils[0].1 += 1;
        let mut missing = records.clone();
        missing[0].foils.pop();
        let mut extra = records.clone();
        extra[2].foils.push(("fma;split=9".into(), 5));
        // (name, records, rows differing, foil disagreements)
        for (name, recs, rows, foil_bad) in [
            ("good", records, 0, 0),
            ("bad", bad, 1, 0),
            ("count", count, 0, 1),
            ("missing", missing, 0, 1),
            ("extra", extra, 0, 1),
        ] {
            let dir = std::env::temp_dir().join(format!("mxbi-conform-{name}-{}", std::process::id()));
            let mut w = CaptureWriter::create(&dir).unwrap();
            w.put_json(
                "cases.json",
                &ConformReport {
                    options: opts.clone(),
                    records: recs,
                    failed: vec![],
                },
            )
            .unwrap();
            w.finish("conform", serde_json::json!({}), vec![]).unwrap();
            let rep = replay(&Capture::open(&dir).unwrap(), RowSelection::All).unwrap();
            assert_eq!(rep.row_mismatches.len(), rows, "{name}");
            assert_eq!(
                rep.foil_disagreements().len(),
                foil_bad,
                "{name}: {:?}",
                rep.foil_disagreements()
            );
            assert_eq!(rep.rows_checked, rep.rows_in_capture);
            assert!(rep.case_replays[discriminating].discriminates(), "{name}");
            if name == "good" {
                assert!(rep.case_replays.iter().all(|c| c.foils.iter().all(|f| f.exact)));
                // a sample replays first, middle and last row; counts over
                // fewer rows than the case are not comparable with the capture
                let sample = replay(&Capture::open(&dir).unwrap(), RowSelection::Sample).unwrap();
                for c in &sample.case_replays {
                    assert_eq!(c.rows_checked, c.rows.min(3), "{}", c.line());
                    assert!(c.foils.iter().all(|f| f.exact == (c.rows <= 3)));
                }
                assert!(sample.foil_disagreements().is_empty());
                assert_eq!(
                    rep.foils_recomputed(),
                    rep.case_replays.iter().map(|c| c.foils.len()).sum::<usize>()
                );
            }
            if name == "bad" {
                // case 1's foil counts are no longer exact: row 0 is not the GPU's
                assert!(rep.case_replays[1].foils.iter().all(|f| !f.exact));
            }
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn a_case_whose_foils_agree_does_not_discriminate() {
        // one product per output: fma and muladd round it once alike (K = 1);
        // over K = 64 products they differ
        for (k, expect) in [(1, false), (64, true)] {
            let c = ConformCase {
                id: 0,
                order: "fma".into(),
                backend16: Backend16::MmaSync,
                m: 4,
                n: 8,
                k,
                elem: InType::F32,
                mx: false,
                class: InputClass::Wide,
                seed: 3,
            };
            let y = c.model(&c.inputs(), None).unwrap();
            let rec = compare(&c, &y, &y, 0x7FBA_DBAD, 0.0);
            let rep = replay_case(&rec, RowSelection::All).unwrap();
            assert!(rep.rows_differing.is_empty());
            assert_eq!(rep.foils.len(), 1);
            assert_eq!(rep.discriminates(), expect, "K = {k}: {}", rep.line());
            assert_eq!(rep.foils[0].elements > 0, expect);
            assert!(rep.foils[0].exact);
            // the capture lists no foil count: reported, not hidden
            assert_eq!(rep.foil_disagreements().len(), 1);
        }
    }
}

#[cfg(test)]
mod timing {
    use super::*;
    use rayon::prelude::*;

    /// Model time of a default run (`cargo test --release -- --ignored conform_model_time --nocapture`).
    #[test]
    #[ignore]
    fn conform_model_time() {
        let t = std::time::Instant::now();
        let cases = generate_cases(&ConformOptions::default());
        eprintln!("{} cases generated in {:?}", cases.len(), t.elapsed());
        for c in &cases {
            let t = std::time::Instant::now();
            let x = c.inputs();
            let rows: Vec<usize> = (0..c.m).collect();
            let _y: Vec<Vec<f32>> = rows.par_iter().map(|&i| c.model(&x, Some(&[i])).unwrap()).collect();
            eprintln!("{:3} {:<60} {}x{}x{} {:?}", c.id, c.order, c.m, c.n, c.k, t.elapsed());
        }
    }
}

#[cfg(test)]
mod generation_stats {
    use super::*;

    /// Which fixed orders the generator kept, and the time it took.
    #[test]
    #[ignore]
    fn generation_stats() {
        let seed = std::env::var("SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(ConformOptions::default().seed);
        let t = std::time::Instant::now();
        let cases = generate_cases(&ConformOptions {
            seed,
            ..Default::default()
        });
        eprintln!("{} cases in {:?}", cases.len(), t.elapsed());
        for (o, ..) in fixed_orders() {
            let canon = o.parse::<Order>().unwrap().to_string();
            eprintln!("{:<60} {}", o, cases.iter().filter(|c| c.order == canon).count());
        }
    }
}
