//! The vendor capture format: `report.json` ([`VendorReport`]: per case and
//! shape the algorithm configurations, pins, timings and row index),
//! `rows.bin` (the distinct GPU rows), `tables.md`, and their writer.

use super::*;

/// A cuBLASLt algorithm's configuration, read back attribute by attribute
/// (`cublasLtMatmulAlgoConfigGetAttribute`), plus capabilities where the
/// library answers (`cublasLtMatmulAlgoCapGetAttribute`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlgoConfig {
    pub algo_id: i64,
    pub tile_id: u64,
    pub splitk_num: u64,
    pub reduction_scheme: u64,
    pub cta_swizzling: u64,
    pub custom_option: u64,
    pub stages_id: u64,
    pub inner_shape_id: u64,
    pub cluster_shape_id: u64,
    /// `CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS`.
    pub numerical_impl_flags: Option<u64>,
    /// `CUBLASLT_ALGO_CAP_SPLITK_SUPPORT`.
    pub splitk_support: Option<u64>,
    /// `CUBLASLT_ALGO_CAP_REDUCTION_SCHEME_MASK`.
    pub reduction_scheme_mask: Option<u64>,
}

impl AlgoConfig {
    /// The configuration attributes only (capabilities ignored).
    pub fn same_config(&self, o: &AlgoConfig) -> bool {
        self.key() == o.key()
    }

    fn key(&self) -> [u64; 9] {
        [
            self.algo_id as u64,
            self.tile_id,
            self.splitk_num,
            self.reduction_scheme,
            self.cta_swizzling,
            self.custom_option,
            self.stages_id,
            self.inner_shape_id,
            self.cluster_shape_id,
        ]
    }

    /// `id/tile/stages/splitK/red/swz/custom/inner/cluster`.
    pub fn short(&self) -> String {
        format!(
            "{}/t{}/s{}/k{}/r{}/w{}/c{}/i{}/g{}",
            self.algo_id,
            self.tile_id,
            self.stages_id,
            self.splitk_num,
            self.reduction_scheme,
            self.cta_swizzling,
            self.custom_option,
            self.inner_shape_id,
            self.cluster_shape_id
        )
    }
}

/// The heuristic's top choice at one M.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeuristicPick {
    pub m: usize,
    /// `ok`, or why there was none (e.g. `CUBLAS_STATUS_NOT_SUPPORTED`).
    pub status: String,
    pub config: Option<AlgoConfig>,
    pub workspace_bytes: Option<u64>,
    pub waves_count: Option<f32>,
    /// False if another position at the same M got a different choice.
    pub same_at_all_positions: bool,
}

/// `cublasLtMatmulAlgoCheck` of the pinned algorithm at one M.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PinCheck {
    pub m: usize,
    /// `ok`, or the refusal.
    pub status: String,
    pub workspace_bytes: Option<u64>,
    pub waves_count: Option<f32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PinReport {
    pub pin_m: usize,
    /// What the heuristic chose at `pin_m`.
    pub heuristic_at_pin: AlgoConfig,
    /// The re-initialised algorithm, read back after setting it.
    pub pinned: AlgoConfig,
    /// Whether the re-initialised `cublasLtMatmulAlgo_t` has the same 64
    /// bytes as the heuristic's (false when split-K was changed, or when the
    /// heuristic's struct carries state the attributes do not expose).
    pub reinit_bytes_equal_heuristic: bool,
    pub checks: Vec<PinCheck>,
}

/// Medians of timed runs (CUDA events), microseconds per GEMM.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TimingEntry {
    pub m: usize,
    /// The library's own choice (cuBLAS default, or cuBLASLt heuristic).
    pub heuristic_us: Option<f64>,
    pub pinned_us: Option<f64>,
    /// `heuristic_us / pinned_us`: the pinned algorithm's speed relative
    /// to the heuristic (below 1: the pin is slower).
    pub pinned_speed: Option<f64>,
    pub heuristic_samples_us: Vec<f64>,
    pub pinned_samples_us: Vec<f64>,
    /// Why a variant was not timed.
    pub note: Option<String>,
}

/// Everything recorded for one case at one shape.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseRun {
    pub case: CaseId,
    pub shape: String,
    pub api: Api,
    pub input: InType,
    pub output: InType,
    pub scaling: Scaling,
    /// `cublasGetMathMode` of the classic handle (cuBLAS cases).
    pub math_mode: Option<String>,
    pub heuristic: Vec<HeuristicPick>,
    pub pin: Option<PinReport>,
    /// Why there is no pinned algorithm, when there is none.
    pub pin_error: Option<String>,
    pub timings: Vec<TimingEntry>,
    /// The worst anchor row (of all M, positions and variants that ran)
    /// against the f64 reference.
    pub reference_check: Option<ReferenceCheck>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Variant {
    /// cuBLAS's default, or the cuBLASLt heuristic's top choice at each M.
    Heuristic,
    /// The cuBLASLt algorithm pinned at `pin_m`.
    Pinned,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Heuristic => "heuristic",
            Variant::Pinned => "pinned",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "why")]
pub enum RowStatus {
    Ok,
    /// No algorithm for this problem (the heuristic returned none).
    Unsupported(String),
    /// The pinned algorithm was refused at this M (never replaced).
    Refused(String),
    /// The GEMM ran but the anchor row is not trustworthy (e.g. unwritten).
    Failed(String),
}

impl RowStatus {
    pub fn short(&self) -> &'static str {
        match self {
            RowStatus::Ok => "ok",
            RowStatus::Unsupported(_) => "unsupported",
            RowStatus::Refused(_) => "refused",
            RowStatus::Failed(_) => "failed",
        }
    }
}

/// One anchor output row in `rows.bin`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RowEntry {
    pub case: CaseId,
    pub shape: String,
    pub variant: Variant,
    pub m: usize,
    pub position: String,
    pub row: usize,
    pub status: RowStatus,
    /// Byte offset and length in `rows.bin` (identical rows are stored once).
    pub offset: Option<u64>,
    pub bytes: Option<u64>,
    pub sha256: Option<String>,
}

/// `rows.bin` under construction: identical rows stored once.
#[derive(Default)]
pub struct RowStore {
    pub data: Vec<u8>,
    index: HashMap<Vec<u8>, u64>,
}

impl RowStore {
    /// Stores `row` (or finds it) and returns its offset.
    pub fn put(&mut self, row: &[u8]) -> u64 {
        if let Some(&o) = self.index.get(row) {
            return o;
        }
        let o = self.data.len() as u64;
        self.data.extend_from_slice(row);
        self.index.insert(row.to_vec(), o);
        o
    }

    /// A complete entry for a row that ran.
    #[allow(clippy::too_many_arguments)]
    pub fn entry(
        &mut self,
        case: CaseId,
        shape: &Shape,
        variant: Variant,
        m: usize,
        pos: &Position,
        status: RowStatus,
        row: Option<&[u8]>,
    ) -> RowEntry {
        let (offset, bytes, sha256) = match row {
            Some(r) => (Some(self.put(r)), Some(r.len() as u64), Some(sha256_hex(r))),
            None => (None, None, None),
        };
        RowEntry {
            case,
            shape: shape.name.clone(),
            variant,
            m,
            position: pos.label.clone(),
            row: pos.row,
            status,
            offset,
            bytes,
            sha256,
        }
    }
}

/// One cell of the anchor table: the anchor row at (M, position) against
/// the reference (smallest M that ran).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableCell {
    pub m: usize,
    pub position: String,
    pub row: usize,
    pub status: String,
    pub diff_bytes: Option<u64>,
    pub diff_elems: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CaseTable {
    pub case: CaseId,
    pub shape: String,
    pub variant: Variant,
    /// The M of the reference row (the smallest M that ran; M=1 unless
    /// the case does not support it).
    pub reference_m: Option<usize>,
    pub cells: Vec<TableCell>,
    pub ok_cells: usize,
    pub differing_cells: usize,
    /// Every cell that ran is byte-identical to the reference (None when
    /// nothing ran).
    pub invariant: Option<bool>,
    /// Pinned tables: the pinned reference row equals the heuristic one.
    pub reference_equals_heuristic: Option<bool>,
}

/// `report.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VendorReport {
    pub schema: u32,
    pub options: VendorOptions,
    /// How the inputs are generated (see `push_element`).
    pub generator: String,
    pub workspace_bytes: usize,
    pub tensor_scales: (f32, f32),
    /// CUDA/cuBLAS environment variables that change results, as set.
    pub environment: BTreeMap<String, String>,
    pub runs: Vec<CaseRun>,
    pub rows: Vec<RowEntry>,
    pub tables: Vec<CaseTable>,
    pub notes: Vec<String>,
}

/// A finished run: the report and the bytes of `rows.bin`.
pub struct VendorRun {
    pub report: VendorReport,
    pub rows_bin: Vec<u8>,
}

pub const GENERATOR: &str = "SplitMix64::for_item(seed, kind<<60 | dtype<<56 | N<<40 | K<<24 | M); \
f32: (u32>>8)*2^-23-1; bf16: top 16 bits of that f32; e4m3: sign, exponent field 0..=8, mantissa 0..7; \
scales: 2^(-3..=1); kinds 1 weights, 2 anchor, 3 neighbours(M), 4 weight scales, 5 anchor scales, \
6 neighbour scales(M); dtype 1 f32, 2 bf16, 3 e4m3 (scales use 3)";

/// Environment variables that change what cuBLAS does.
pub fn environment() -> BTreeMap<String, String> {
    [
        "CUBLAS_WORKSPACE_CONFIG",
        "NVIDIA_TF32_OVERRIDE",
        "CUBLASLT_LOG_LEVEL",
        "CUBLAS_LOGINFO_DBG",
        "CUDA_VISIBLE_DEVICES",
        "CUBLASLT_HEURISTICS_CACHE_CAPACITY",
    ]
    .iter()
    .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
    .collect()
}
/// Writes `report.json`, `rows.bin`, `tables.md` (the markdown rendering)
/// and the manifest into `dir`.
pub fn write_capture(dir: &Path, run: &VendorRun, device: serde_json::Value, notes: Vec<String>) -> Result<Manifest> {
    let mut w = CaptureWriter::create(dir)?;
    w.put("rows.bin", &run.rows_bin)?;
    w.put_json("report.json", &run.report)?;
    w.put("tables.md", render_markdown(&run.report).as_bytes())?;
    w.finish(SUITE, device, notes)
}
