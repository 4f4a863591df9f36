//! The bodies of mxbi's fuzz targets, one file per target. Each body is a
//! plain function of the input bytes that panics exactly when a property
//! fails (a panic inside the library, or an assertion here). The cargo-fuzz
//! binaries in `fuzz_targets/` call them; `tests/fuzz_corpus.rs` in the
//! main crate includes this file with `#[path]` and replays every committed
//! corpus file `fuzz/corpus/<target>/*` through the same bodies on stable
//! Rust (docs/FUZZING.md).

pub mod bi_case;
pub mod bytes;
pub mod cast_paths;
pub mod dispatch_json;
pub mod dump_folder;
pub mod exec_reply;
pub mod mx_quantize;
pub mod npy_reader;
pub mod order_parser;
pub mod safetensors_reader;

/// A target's body: true when the input got past parsing to the property
/// checks; a panic when a property fails.
pub type Body = fn(&[u8]) -> bool;

/// Every target: its name (the binary, and the corpus folder) and body.
pub const TARGETS: &[(&str, Body)] = &[
    ("bi_case", bi_case::run),
    ("cast_paths", cast_paths::run),
    ("dispatch_json", dispatch_json::run),
    ("dump_folder", dump_folder::run),
    ("exec_reply", exec_reply::run),
    ("mx_quantize", mx_quantize::run),
    ("npy_reader", npy_reader::run),
    ("order_parser", order_parser::run),
    ("safetensors_reader", safetensors_reader::run),
];
