//! Each cast preset names the release it reproduces
//! ([`CastPreset::release`]); the evidence for it must come from that
//! release. Checked here: the `# oracle: LIBRARY VERSION` lines that the
//! scripts in `reference/oracles/` write into every vector file from the
//! installed package's metadata, the pins of `reference/requirements*.txt`
//! (the environment `reference/gen_all.sh` builds), and, for `nvidia`, the
//! CUDA of the GPU sweep's capture. A preset moved to another release
//! without new vectors, or vectors or pins of another release than the
//! preset names, fail here.

#[path = "common/oracle_vectors.rs"]
mod oracle_vectors;

use mxbi::format::{CastPreset, Release};
use oracle_vectors::{header, path};

/// The vector files each preset is checked against (tests/oracles.rs), by
/// preset spelling.
const VECTORS: &[(&str, &[&str])] = &[
    (
        "ml_dtypes",
        &[
            "vectors/cast_ml_dtypes.tsv.gz",
            "vectors/exhaustive_ml_dtypes.tsv",
            "vectors/decode.tsv",
        ],
    ),
    (
        "ml_dtypes@0.6",
        &[
            "vectors/cast_ml_dtypes@0.6.tsv.gz",
            "vectors/exhaustive_ml_dtypes@0.6.tsv",
        ],
    ),
    ("torch", &["vectors/cast_torch.tsv.gz", "vectors/exhaustive_torch.tsv"]),
    ("gfloat", &["vectors/cast_gfloat.tsv.gz", "vectors/decode.tsv"]),
];

/// The requirements file that pins each preset's release, by spelling.
const PINS: &[(&str, &str)] = &[
    ("ml_dtypes", "requirements.txt"),
    ("ml_dtypes@0.6", "requirements-ml_dtypes@0.6.txt"),
    ("torch", "requirements.txt"),
    ("gfloat", "requirements.txt"),
];

/// The capture of the GPU sweep the `nvidia` preset was measured with.
const NVIDIA_CAPTURE: &str = "captures/casts/manifest.json";

fn preset(spelling: &str) -> CastPreset {
    spelling.parse().unwrap()
}

/// The version of `library` a vector file's header records, if any.
fn recorded(file: &str, library: &str) -> Option<String> {
    header(file).iter().find_map(|l| {
        let mut w = l.strip_prefix("oracle:")?.split_whitespace();
        (w.next()? == library).then(|| w.next().unwrap_or("").to_string())
    })
}

/// The version `library` is pinned to (`library==version`) in a
/// requirements file of reference/, if any.
fn pinned(file: &str, library: &str) -> Option<String> {
    let text = std::fs::read_to_string(path(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    text.lines().find_map(|l| {
        let (name, version) = l.split('#').next()?.trim().split_once("==")?;
        (name.trim() == library).then(|| version.trim().to_string())
    })
}

/// Every disagreement between the releases the presets name and the records.
fn disagreements(release: impl Fn(CastPreset) -> Release) -> Vec<String> {
    let mut bad = Vec::new();
    for &(spelling, files) in VECTORS {
        let want = release(preset(spelling));
        for file in files {
            match recorded(file, want.library) {
                Some(v) if v == want.version => {}
                Some(v) => bad.push(format!(
                    "{file} was written by {} {v}; the preset {spelling} names {want}",
                    want.library
                )),
                None => bad.push(format!("{file} records no {} release", want.library)),
            }
        }
    }
    for &(spelling, file) in PINS {
        let want = release(preset(spelling));
        match pinned(file, want.library) {
            Some(v) if v == want.version => {}
            Some(v) => bad.push(format!(
                "{file} pins {}=={v}; the preset {spelling} names {want}",
                want.library
            )),
            None => bad.push(format!("{file} pins no {}", want.library)),
        }
    }
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path(NVIDIA_CAPTURE)).unwrap()).unwrap();
    let nvrtc: Vec<String> = manifest["device"]["nvrtc_version"]
        .as_array()
        .expect("the capture records the NVRTC version")
        .iter()
        .map(|n| n.to_string())
        .collect();
    let want = release(CastPreset::Nvidia);
    if want.library != "CUDA" || nvrtc.join(".") != want.version {
        bad.push(format!(
            "{NVIDIA_CAPTURE} was measured with CUDA (NVRTC) {}; the preset nvidia names {want}",
            nvrtc.join(".")
        ));
    }
    bad
}

#[test]
fn the_oracle_releases_on_record_are_the_releases_the_presets_name() {
    let bad = disagreements(CastPreset::release);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn every_preset_has_its_release_on_record() {
    for p in CastPreset::ALL {
        let listed = p == CastPreset::Nvidia
            || (VECTORS.iter().any(|(s, _)| preset(s) == p) && PINS.iter().any(|(s, _)| preset(s) == p));
        assert!(listed, "{} has no vectors or pin on record", p.name());
    }
}

/// The check fails when a preset names a release other than the one that
/// wrote its evidence: `ml_dtypes` moved on to 0.7.1 without new vectors,
/// or `ml_dtypes@0.6` taken for 0.7.0.
#[test]
fn a_preset_naming_another_release_than_its_evidence_is_caught() {
    let moved = disagreements(|p| match p {
        CastPreset::MlDtypes => Release {
            library: "ml_dtypes",
            version: "0.7.1",
        },
        p => p.release(),
    });
    // three vector files and one pin
    assert_eq!(moved.len(), 4, "{moved:#?}");
    assert!(moved
        .iter()
        .all(|m| m.contains("the preset ml_dtypes names ml_dtypes 0.7.1")));
    let swapped = disagreements(|p| match p {
        CastPreset::MlDtypes06 => CastPreset::MlDtypes.release(),
        p => p.release(),
    });
    assert_eq!(swapped.len(), 3, "{swapped:#?}");
    assert!(swapped[0].starts_with("vectors/cast_ml_dtypes@0.6.tsv.gz was written by ml_dtypes 0.6.0"));
}
