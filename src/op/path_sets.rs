//! Path sets: the orders a Hopper kernel realises, put in place of an
//! all-gather-matmul preset's own paths (whose fused `mma(k=32,f=25)` sum
//! with scales inside has no generated kernel), so the CPU op model
//! (`op:PRESET,paths=SET`) and the NCCL subject on GPUs
//! (`nccl:PRESET,paths=SET`) run the same op.
//!
//! # Contract
//! A set replaces the LOCAL path by `{order, scale_point}` of the set; a
//! preset with a GATHER path gets the set's order there too, keeping the
//! preset's GATHER scale point when it re-rounds x2 (`requant:…`: the
//! anti-pattern under test) and the set's scale point otherwise, and
//! keeping the preset's `x1_requant`. A preset without a GATHER path stays
//! without one. A preset whose GATHER order differs from its LOCAL order
//! (the difference under test is the K loop itself) is refused: a set would
//! erase that difference. The sets are those of the two-GPU collective suite
//! (`device::collective::default_cases`).

use serde_json::{json, Value};

/// One path set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathSet {
    /// Its name in specs: `paths=NAME`.
    pub name: &'static str,
    pub order: &'static str,
    /// The scale point of the LOCAL path.
    pub scale_point: &'static str,
}

/// Every path set.
pub const PATH_SETS: &[PathSet] = &[
    PathSet {
        name: "fma",
        order: "fma;scale=dequant",
        scale_point: "dequant",
    },
    PathSet {
        name: "wgmma",
        order: "hopper-fp8-wgmma;promote=32;scale=block",
        scale_point: "block",
    },
];

/// The set named `name` (Err: one line listing the sets).
pub fn find(name: &str) -> Result<&'static PathSet, String> {
    PATH_SETS.iter().find(|s| s.name == name).ok_or_else(|| {
        format!(
            "unknown path set '{name}'; expected one of: {}",
            PATH_SETS.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        )
    })
}

impl PathSet {
    /// Puts this set in place of the paths of an all-gather-matmul spec
    /// `spec` (a preset's JSON template); Err (one line) when the preset's
    /// paths differ in their order.
    pub fn apply(&self, spec: &mut Value) -> Result<(), String> {
        let path = |sp: &str| json!({"order": self.order, "scale_point": sp});
        let gather = spec.get("gather").cloned().unwrap_or(Value::Null);
        if gather.is_object() && gather.get("order") != spec["local"].get("order") {
            return Err(format!(
                "paths={} would give both paths one order, erasing the difference of this preset's GATHER order",
                self.name
            ));
        }
        spec["local"] = path(self.scale_point);
        if gather.is_object() {
            let sp = match gather.get("scale_point").and_then(Value::as_str) {
                Some(p) if p.starts_with("requant:") => p.to_string(),
                _ => self.scale_point.to_string(),
            };
            let mut g = path(&sp);
            if let Some(x) = gather.get("x1_requant").filter(|x| !x.is_null()) {
                g["x1_requant"] = x.clone();
            }
            spec["gather"] = g;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::OpSpec;

    fn applied(preset: &str, set: &str) -> crate::op::agmm::AgmmSpec {
        let p = crate::op::presets::find(preset).unwrap();
        let mut v = (p.template)();
        find(set).unwrap().apply(&mut v).unwrap();
        match OpSpec::from_value(v).unwrap() {
            OpSpec::AllGatherMatmul(s) => s,
            _ => panic!("not agmm"),
        }
    }

    #[test]
    fn sets_replace_orders_and_keep_the_anti_pattern() {
        let s = applied("agmm-v2-prefix", "fma");
        assert_eq!(s.local.order, "fma;scale=dequant");
        let g = s.gather.as_ref().unwrap();
        assert_eq!(g.order, "fma;scale=dequant");
        assert_eq!(g.scale_point.to_string(), "requant:e4m3");
        let s = applied("agmm-v2-fixed", "wgmma");
        assert!(s.gather.is_none());
        assert_eq!(s.local.scale_point.to_string(), "block");
        let s = applied("agmm-v2-coupled", "fma");
        let g = s.gather.as_ref().unwrap();
        assert_eq!(g.scale_point.to_string(), "dequant");
        assert!(g.x1_requant.is_some());
        let mut kloop = (crate::op::presets::find("agmm-v2-kloop").unwrap().template)();
        let e = find("fma").unwrap().apply(&mut kloop).unwrap_err();
        assert!(e.contains("erasing the difference"), "{e}");
        let e = find("nope").unwrap_err();
        assert!(e.contains("expected one of: fma, wgmma"), "{e}");
    }
}
