//! mxbi: bit-exact emulation of narrow floating-point formats and GEMM
//! accumulation orders, for batch-invariance checking of GPU/NPU kernels.
//!
//! # Module map
//!
//! Every module with its floor: a module imports only modules on lower
//! floors (tests/layering.rs reads this table and checks it, and checks
//! that no two files of one folder import each other in a circle). The
//! `mxbi` command line (`src/cli`, private to the binary) sits above them all.
//!
//! | floor | module | concept |
//! |---|---|---|
//! | 0 | [`format`](mod@format) | the one element-type vocabulary ([`format::Format`], parameters derived in `format::MiniFloat`), the one exact value ([`format::Exact`]) and reference rounding, encoders, E8M0, cast policies and presets |
//! | 0 | [`limits`] | the size limits shared by every layer (K, batch) and their one-line refusals |
//! | 0 | [`rng`] | the one deterministic generator of test cases (and the benchmarks' fixed input) |
//! | 0 | [`message`] | messages as one clear line |
//! | 1 | [`mx`] | OCP MX block quantization, scale modes, layouts, exact block dots |
//! | 1 | [`order`] | the accumulation-order grammar (docs/ORDERS.md), reduction trees, tree diffs |
//! | 1 | [`io`] | `.npy` / `.safetensors` tensors (the on-disk dtypes) |
//! | 2 | [`gemm`] | bit-exact evaluation of an order on f32/bf16/f16/MX inputs (generic evaluator, fast kernels, traces) |
//! | 3 | [`subject`] | the subject interface: anything that computes a GEMM-like op; the CPU model, dispatch tables, external runners, dump folders; the spec factory's machinery ([`subject::spec`]) |
//! | 4 | [`explain`] | the explainer: the order behind observed bytes, a subject's recovered tree, divergence, exactness, fixes (docs/EXPLAIN.md) |
//! | 4 | [`accuracy`] | accuracy verdicts: exact goldens, double-benchmark metrics and standards, ULP view, scoped tolerances (docs/ACCURACY.md) |
//! | 5 | [`bi`] | the batch-invariance checker: variant families, per-cell verdicts with power, witnesses, reports (docs/BI.md) |
//! | 6 | [`fuzz`] | `mxbi fuzz`: checker cells drawn toward a subject's edges (proptest strategies), shrunk to a minimal case file, a regression corpus |
//! | 6 | [`op`] | fused comm+matmul op models (multi-rank, simulated), per-row provenance (docs/OPS.md); the `op:` subject kind |
//! | 7 | [`device`] | real GPUs (features `cuda`/`nccl`): generated kernels, probes, casts, vendor GEMMs, NCCL, the GPU subject kinds; every capture replays on the CPU through one `device::replay::Replay` interface (docs/DEVICE.md) |
//! | 8 | [`subjects`] | the one subject factory of this build: every kind (`model:`, `dispatch:`, `op:`, `exec:`, `dump:`, GPU, `nccl:`) listed once; case-file exec policy; fuzz targets |
//! | 9 | [`diagnosis`] | each reported failure explained: a cell's two sides re-run, identified, diffed, traced through an op's provenance (docs/BI.md) |
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
pub mod device;
pub mod diagnosis;
pub mod explain;
pub mod format;
pub mod fuzz;
pub mod gemm;
pub mod io;
pub mod limits;
pub mod message;
pub mod mx;
pub mod op;
pub mod order;
pub mod rng;
pub mod subject;
pub mod subjects;
