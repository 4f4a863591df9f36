//! Named op presets: a JSON template per preset plus the world sizes it
//! supports. A spec `{"preset": NAME, key: value, ...}` starts from the
//! template and replaces the given keys (whole values; nested objects are
//! not merged), then is read as an [`OpSpec`].

use super::{OpError, OpSpec, Result};
use serde_json::{json, Value};

/// One preset.
pub struct Preset {
    pub name: &'static str,
    pub description: &'static str,
    /// The key holding the world size, and the sizes allowed (None: any).
    pub world: Option<(&'static str, &'static [usize])>,
    pub template: fn() -> Value,
}

const MX_ORDER: &str = "mma(k=32,f=25,in=e4m3);scale=fused";

/// `agmm-v2-kloop`'s GATHER schedule: the LOCAL step arithmetic and scale
/// point, but the K loop cut into fresh k-tiles of 128 (the cube's base K),
/// each tile's tensor-core chain started from +0 and the tile partials added
/// in f32 (`RN`), where LOCAL carries one accumulator through the whole K.
pub const KLOOP_GATHER_ORDER: &str = "mma(k=32,f=25,in=e4m3);ktile=128;tile=fresh;scale=fused";

fn agmm(gather: Value) -> Value {
    json!({
        "op": "all-gather-matmul",
        "world_size": 2, "m_per_rank": 4, "k": 256, "n": 64,
        "x2_layout": "kn", "mx_format": "mxfp8-e4m3",
        "local": {"order": MX_ORDER, "scale_point": "fused"},
        "gather": gather,
    })
}

fn reduce(op: &str, red: Value) -> Value {
    json!({
        "op": op, "world_size": 4, "m": 16, "k": 256, "n": 64,
        "order": "hopper-bf16", "reduction": red,
    })
}

fn moe(ep: Option<usize>) -> Value {
    json!({
        "op": "moe",
        "tokens": if ep.is_some() { 128 } else { 64 },
        "hidden": 128, "n": 64,
        "experts": if ep.is_some() { 16 } else { 8 },
        "ep_world_size": ep,
        "tiling": [
            {"max_rows": 8, "order": "hopper-bf16;split=4"},
            {"order": "hopper-bf16"}
        ],
    })
}

fn quant(q: &str) -> Value {
    json!({"op": "quant-matmul", "m": 64, "k": 128, "n": 32, "quant": q,
           "format": "mxfp8-e4m3", "order": "fma"})
}

const AGMM_WS: &[usize] = &[2, 4, 8];
const RED_WS: &[usize] = &[2, 4, 8];
const EP_WS: &[usize] = &[8, 16];

pub const PRESETS: &[Preset] = &[
    Preset {
        name: "agmm-v2-prefix",
        description: "AllGatherMatmul, MXFP8, anti-pattern model: GATHER rows re-round x2 to per-column scales; differs from LOCAL only with K-varying x2 scales",
        world: Some(("world_size", AGMM_WS)),
        template: || agmm(json!({"order": MX_ORDER, "scale_point": "requant:e4m3"})),
    },
    Preset {
        name: "agmm-v2-kloop",
        description: "AllGatherMatmul, MXFP8, seed-000's literal mechanism: the same scale point (fused) on both paths, different K-loop schedules (LOCAL one carried chain, GATHER fresh k-tiles of 128 added in f32)",
        world: Some(("world_size", AGMM_WS)),
        template: || agmm(json!({"order": KLOOP_GATHER_ORDER, "scale_point": "fused"})),
    },
    Preset {
        name: "agmm-v2-fixed",
        description: "AllGatherMatmul, MXFP8, one path for every row (x2 scales inside the fused sum)",
        world: Some(("world_size", AGMM_WS)),
        template: || agmm(Value::Null),
    },
    Preset {
        name: "agmm-v2-coupled",
        description: "AllGatherMatmul, MXFP8, second-hypothesis model: GATHER rows re-round x1 to the largest scale over their source shard's rows (content coupling); differs from LOCAL only when x1 scales differ between rows",
        world: Some(("world_size", AGMM_WS)),
        template: || agmm(json!({"order": MX_ORDER, "scale_point": "fused", "x1_requant": "e4m3"})),
    },
    Preset {
        name: "mmrs-ring",
        description: "MatmulReduceScatter, ring reduction: a chunk's add order depends on its owner rank",
        world: Some(("world_size", RED_WS)),
        template: || reduce("matmul-reduce-scatter", json!({"kind": "ring"})),
    },
    Preset {
        name: "mmrs-tree",
        description: "MatmulReduceScatter, pairwise tree over ranks 0..WS-1 for every chunk",
        world: Some(("world_size", RED_WS)),
        template: || reduce("matmul-reduce-scatter", json!({"kind": "tree"})),
    },
    Preset {
        name: "mmrs-fixed",
        description: "MatmulReduceScatter, serial rank 0..WS-1 order for every chunk",
        world: Some(("world_size", RED_WS)),
        template: || reduce("matmul-reduce-scatter", json!({"kind": "fixed"})),
    },
    Preset {
        name: "mmrs-nondet",
        description: "MatmulReduceScatter, a random add order per chunk and per run (seeded)",
        world: Some(("world_size", RED_WS)),
        template: || reduce("matmul-reduce-scatter", json!({"kind": "nondet", "seed": 1})),
    },
    Preset {
        name: "mmar-ring",
        description: "MatmulAllReduce, ring (reduce-scatter + all-gather): position-dependent, rank-consistent",
        world: Some(("world_size", RED_WS)),
        template: || reduce("matmul-all-reduce", json!({"kind": "ring"})),
    },
    Preset {
        name: "mmar-fixed",
        description: "MatmulAllReduce, serial rank 0..WS-1 order for every chunk",
        world: Some(("world_size", RED_WS)),
        template: || reduce("matmul-all-reduce", json!({"kind": "fixed"})),
    },
    Preset {
        name: "mmar-nondet",
        description: "MatmulAllReduce, a random add order per chunk and per run (seeded)",
        world: Some(("world_size", RED_WS)),
        template: || reduce("matmul-all-reduce", json!({"kind": "nondet", "seed": 1})),
    },
    Preset {
        name: "moe-grouped",
        description: "GroupedMatmul for MoE: top-1 routing, split-K order for experts with <= 8 rows",
        world: None,
        template: || moe(None),
    },
    Preset {
        name: "moe-ep",
        description: "AlltoAll + AllGather + BatchMatmul, expert parallel (EP 8 or 16), same tiling heuristic",
        world: Some(("ep_world_size", EP_WS)),
        template: || moe(Some(8)),
    },
    Preset {
        name: "rmsnorm",
        description: "RMSNorm, sum of squares by a fixed warp-butterfly order (BI-safe)",
        world: None,
        template: || json!({"op": "rms-norm", "m": 8, "h": 256, "eps": 1e-6, "order": "fma;lanes=32"}),
    },
    Preset {
        name: "rmsnorm-batch-split",
        description: "RMSNorm whose reduction splits 4 ways when m <= 8 (negative example)",
        world: None,
        template: || {
            json!({"op": "rms-norm", "m": 8, "h": 256, "eps": 1e-6, "order": "fma;lanes=32",
                   "small_batch": {"max_m": 8, "order": "fma;split=4"}})
        },
    },
    Preset {
        name: "quant-per-tensor",
        description: "Dynamic FP8 quantization with a per-tensor amax inside the op (couples rows)",
        world: None,
        template: || quant("per-tensor"),
    },
    Preset {
        name: "quant-per-row",
        description: "Dynamic FP8 quantization with a per-row amax (BI-safe control)",
        world: None,
        template: || quant("per-row"),
    },
    Preset {
        name: "quant-mx-k",
        description: "Dynamic MXFP8 quantization, blocks along K (BI-safe control)",
        world: None,
        template: || quant("mx-k"),
    },
    Preset {
        name: "quant-mx-m",
        description: "Dynamic MXFP8 quantization, blocks of 32 along M (couples rows)",
        world: None,
        template: || quant("mx-m"),
    },
];

pub fn find(name: &str) -> Result<&'static Preset> {
    PRESETS
        .iter()
        .find(|p| p.name == name)
        .ok_or_else(|| OpError::UnknownPreset {
            name: name.to_string(),
            known: PRESETS.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
        })
}

/// `{"preset": NAME, overrides...}` -> the spec.
pub fn resolve(v: &Value) -> Result<OpSpec> {
    let obj = v
        .as_object()
        .ok_or_else(|| OpError::Spec("a preset spec must be a JSON object".into()))?;
    let name = obj
        .get("preset")
        .and_then(Value::as_str)
        .ok_or_else(|| OpError::Spec("'preset' must be a string".into()))?;
    let p = find(name)?;
    let mut t = (p.template)();
    let tobj = t.as_object_mut().expect("templates are objects");
    for (k, val) in obj {
        if k == "preset" {
            continue;
        }
        if k == "op" {
            return Err(OpError::Spec(format!(
                "preset '{name}' sets the op; remove the 'op' key"
            )));
        }
        tobj.insert(k.clone(), val.clone());
    }
    if let Some((key, sizes)) = p.world {
        let got = tobj.get(key).and_then(Value::as_u64).unwrap_or(0) as usize;
        if !sizes.contains(&got) {
            return Err(OpError::WorldSize {
                preset: name.to_string(),
                got,
                supported: sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "),
            });
        }
    }
    serde_json::from_value::<OpSpec>(t).map_err(|e| OpError::Spec(format!("preset '{name}': {e}")))
}
