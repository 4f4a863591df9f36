//! mxbi: bit-exact emulation of narrow floating-point formats and GEMM
//! accumulation orders, for batch-invariance checking of GPU/NPU kernels.
//!
//! # Module map (imports point down this list only)
//!
//! | module | concept |
//! |---|---|
//! | [`format`](mod@format) | the one element-type vocabulary ([`format::Format`], parameters derived in `format::MiniFloat`), the one exact value ([`format::Exact`]) and reference rounding, encoders, E8M0, cast policies and presets |
//! | [`mx`] | OCP MX block quantization, scale modes, layouts, exact block dots |
//! | [`order`] | the accumulation-order grammar (docs/ORDERS.md), reduction trees, tree diffs |
//! | [`gemm`] | bit-exact evaluation of an order on f32/bf16/f16/MX inputs (generic evaluator, fast kernels, traces) |
//! | [`subject`] | the subject interface: anything that computes a GEMM-like op; the CPU model is the first |
//! | [`explain`] | the explainer: the order behind observed bytes, a subject's recovered tree, divergence, exactness, fixes (docs/EXPLAIN.md) |
//! | [`fuzz`] | `mxbi fuzz`: checker cells drawn toward a subject's edges (proptest strategies), shrunk to a minimal case file, a regression corpus |
//! | [`accuracy`] | accuracy verdicts: exact goldens, double-benchmark metrics and standards, ULP view, scoped tolerances (docs/ACCURACY.md) |
//! | [`op`] | fused comm+matmul op models (multi-rank, simulated), per-row provenance (docs/OPS.md) |
//! | [`io`] | `.npy` / `.safetensors` tensors |
//! | [`rng`] | the one deterministic generator of test cases |
//! | [`device`] | real GPUs (features `cuda`/`nccl`): generated kernels, probes, casts, vendor GEMMs, NCCL; each suite split into cases, kernels, comparison, capture format, replay and reports; every capture replays on the CPU through one `device::replay::Replay` interface (docs/DEVICE.md) |
//! | [`cli`] | the `mxbi` command: argument parsing and printing, no numerics |
//!
//! # Data flow
//!
//! Inputs (f32 values, or MX codes + E8M0 scales from [`mx`]) and an
//! [`order::Order`] form a [`gemm::Problem`]; [`gemm::gemm`] evaluates the
//! order's [`order::Tree`] for every requested output element with the one
//! exact step arithmetic of [`gemm::step`]. A [`subject::Subject`] wraps
//! such a computation (the model, an op model, a GPU kernel, an external
//! runner) behind one call, which is all the checking layers see. GPU
//! results are captured (`device::capture`) and replayed against the model
//! on the CPU (`device::replay`).

pub mod accuracy;
pub mod bi;
pub mod cli;
pub mod device;
pub mod explain;
pub mod format;
pub mod fuzz;
pub mod gemm;
pub mod io;
pub mod limits;
pub mod mx;
pub mod op;
pub mod order;
pub mod rng;
pub mod subject;
