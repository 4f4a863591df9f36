//! The collective cases: an op spec, input seed and x2-scale mode each
//! (the two-GPU set and the sequential one-GPU set).

use crate::device::{DeviceError, Result};
use crate::op::{generate, run_op, GenOpts, Inputs, OpOutput, OpSpec, X2Scales};
use serde::{Deserialize, Serialize};

/// One two-GPU case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CollectiveCase {
    pub name: String,
    /// The spec (preset with overrides, or a full spec) as given.
    pub spec: serde_json::Value,
    pub seed: u64,
    pub x2_scales: X2Scales,
}

impl CollectiveCase {
    pub fn resolve(&self) -> Result<OpSpec> {
        OpSpec::from_value(self.spec.clone()).map_err(|e| DeviceError::Refused(format!("{}: {e}", self.name)))
    }

    pub fn inputs(&self, spec: &OpSpec) -> Inputs {
        generate(spec, &GenOpts::new(self.seed).x2(self.x2_scales))
    }

    pub fn model(&self) -> Result<OpOutput> {
        let spec = self.resolve()?;
        run_op(&spec, &self.inputs(&spec)).map_err(|e| DeviceError::Refused(format!("{}: model: {e}", self.name)))
    }
}

/// The cases of the two-GPU run: both AllGatherMatmul presets with paths a
/// Hopper kernel realises, with identity and K-varying x2 scales, and a
/// MatmulAllReduce.
pub fn default_cases(world: usize) -> Vec<CollectiveCase> {
    use serde_json::json;
    let shape = json!({"world_size": world, "m_per_rank": 64, "k": 1024, "n": 256});
    let with = |base: serde_json::Value, extra: serde_json::Value| {
        let mut v = shape.clone();
        for (k, x) in base.as_object().unwrap().iter().chain(extra.as_object().unwrap()) {
            v[k] = x.clone();
        }
        v
    };
    let mut cases = Vec::new();
    let paths = [
        (
            "fma",
            json!({"order": "fma;scale=dequant", "scale_point": "dequant"}),
            json!({"order": "fma;scale=dequant", "scale_point": "requant:e4m3"}),
        ),
        (
            "wgmma-promote",
            json!({"order": "hopper-fp8-wgmma;promote=32;scale=block", "scale_point": "block"}),
            json!({"order": "hopper-fp8-wgmma;promote=32;scale=block", "scale_point": "requant:e4m3"}),
        ),
    ];
    for (pname, local, gather) in &paths {
        for x2 in [X2Scales::Identity, X2Scales::KVarying] {
            let tag = match x2 {
                X2Scales::Identity => "id",
                X2Scales::KConstant => "kconst",
                X2Scales::KVarying => "kvar",
            };
            cases.push(CollectiveCase {
                name: format!("agmm-v2-prefix/{pname}/{tag}"),
                spec: with(
                    json!({"preset": "agmm-v2-prefix"}),
                    json!({"local": local, "gather": gather}),
                ),
                seed: 7,
                x2_scales: x2,
            });
            cases.push(CollectiveCase {
                name: format!("agmm-v2-fixed/{pname}/{tag}"),
                spec: with(json!({"preset": "agmm-v2-fixed"}), json!({"local": local})),
                seed: 7,
                x2_scales: x2,
            });
        }
    }
    for kind in ["fixed", "ring"] {
        cases.push(CollectiveCase {
            name: format!("mmar-{kind}/hopper-bf16"),
            spec: json!({"preset": format!("mmar-{kind}"), "world_size": world, "m": 64, "k": 1024, "n": 256}),
            seed: 11,
            x2_scales: X2Scales::Identity,
        });
    }
    // NCCL's reduce-scatter against the ring model; from WS 3 on the run
    // names the order of every element run (`reduction_orders`)
    cases.push(CollectiveCase {
        name: "mmrs-ring/hopper-bf16".into(),
        spec: json!({"preset": "mmrs-ring", "world_size": world, "m": 64, "k": 1024, "n": 256}),
        seed: 11,
        x2_scales: X2Scales::Identity,
    });
    cases
}

/// The cases of the sequential one-GPU run at world size `world`: the
/// AllGatherMatmul cases of [`default_cases`] (both presets, both path
/// orders, identity and K-varying x2 scales) with 128 rows in all
/// (`M_per_rank = 128 / world`), and no MatmulAllReduce (its reduction
/// order is NCCL's own and is not emulated).
pub fn sequential_cases(world: usize) -> Vec<CollectiveCase> {
    let mpr = (128 / world.max(1)).max(1);
    default_cases(world)
        .into_iter()
        .filter(|c| c.name.starts_with("agmm-"))
        .map(|mut c| {
            c.spec["m_per_rank"] = serde_json::json!(mpr);
            c
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::compare::op_cross_rank_differences;
    use super::*;
    #[test]
    fn sequential_cases_are_the_all_gather_cases_with_128_rows() {
        for ws in [2, 4, 8] {
            let cases = sequential_cases(ws);
            assert_eq!(cases.len(), 8);
            for c in &cases {
                let OpSpec::AllGatherMatmul(s) = c.resolve().unwrap() else {
                    panic!("{}: not an all-gather-matmul", c.name)
                };
                assert_eq!((s.world_size, s.world_size * s.m_per_rank), (ws, 128), "{}", c.name);
            }
        }
    }

    #[test]
    fn default_cases_resolve_and_the_model_shows_the_anti_pattern() {
        for c in default_cases(2) {
            let out = c.model().unwrap_or_else(|e| panic!("{}: {e}", c.name));
            let per: Vec<Vec<f32>> = out.per_rank.iter().map(|r| r.data.clone()).collect();
            let diff = op_cross_rank_differences(&c.resolve().unwrap(), &per, out.per_rank[0].cols);
            let expect_fail = c.name.starts_with("agmm-v2-prefix") && c.name.ends_with("kvar");
            assert_eq!(!diff.is_empty(), expect_fail, "{}", c.name);
        }
    }
}
