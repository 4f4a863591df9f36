//! An op spec read from JSON: a full spec (`{"op": ...}`) or a preset
//! with overrides ([`super::presets`]), validated before it is returned.

use super::definition::OpSpec;
use super::error::{OpError, Result};
use super::presets;

impl OpSpec {
    /// Reads a spec from JSON: either a full spec (`{"op": ...}`) or a
    /// preset with overrides (`{"preset": "agmm-v2-prefix", "k": 512}`).
    pub fn from_json(text: &str) -> Result<OpSpec> {
        let v: serde_json::Value =
            serde_json::from_str(text).map_err(|e| OpError::Spec(format!("not valid JSON: {e}")))?;
        Self::from_value(v)
    }

    pub fn from_value(v: serde_json::Value) -> Result<OpSpec> {
        let spec = if v.get("preset").is_some() {
            presets::resolve(&v)?
        } else {
            serde_json::from_value::<OpSpec>(v).map_err(|e| OpError::Spec(e.to_string()))?
        };
        spec.validate()?;
        Ok(spec)
    }
}
