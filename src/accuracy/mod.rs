//! Accuracy verdicts beside batch invariance (docs/ACCURACY.md): an exact
//! golden where exactness is cheap, the error metrics of the double
//! benchmark, the standards of the Ascend ATK and msprobe, the single
//! benchmark and PyTorch `assert_close` defaults (one table of numbers),
//! the ULP view with the cancellation diagnostic, and scoped tolerances
//! proposed from a sweep.
//!
//! Contract: every output is handled as f64 values of its output type
//! (f64, f32, bf16, f16, FP8 E4M3/E5M2, widened exactly); the golden is
//! [`golden::Golden`], with its own error bound; a verdict is
//! [`standards::Verdict`], and [`report::judge`] puts verdict, metrics and
//! ULP view into one [`report::Report`]. Like `bi`, this module reaches
//! kernels only through `subject` and never imports `device`, `op` or
//! `cli` (tests/layering.rs).
//!
//! | file | concern |
//! |---|---|
//! | [`golden`] | exact sums of exact products (wide accumulator), MX block dots, FP8 products, roundings to an output type; f64 goldens with a bound |
//! | [`metrics`] | RE, MaxRE, AvgRE, RMSE, EB |
//! | [`table`] | the one table of thresholds, limits and defaults, with sources |
//! | [`standards`] | the standards' verdicts |
//! | [`ulp`] | ULP distances, histogram, worst elements, cancellation labels |
//! | [`scoped`] | worst errors per scope of a sweep; proposed atol/rtol |
//! | [`report`] | one report: verdict, golden bound, ULP views |
//! | [`subject`] | a subject judged on a problem; the summary a BI case report carries |

pub mod golden;
pub mod metrics;
pub mod report;
pub mod scoped;
pub mod standards;
pub mod subject;
pub mod table;
pub mod ulp;

pub use golden::{Bound, ExactSum, Golden};
pub use metrics::{metrics, Metrics};
pub use report::{judge, Report};
pub use scoped::{scoped, Proposal, Sample, Scope};
pub use standards::{evaluate, Case, Standard, Status, Verdict};
pub use subject::{judge_subject, CaseAccuracy};
