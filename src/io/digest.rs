//! SHA-256 digests as lower-case hex: the one spelling of a file's or a
//! buffer's digest (capture manifests, dump-folder keys).

use sha2::{Digest, Sha256};

/// The SHA-256 of `bytes`, 64 lower-case hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex_lower(&Sha256::digest(bytes))
}

/// `bytes` as lower-case hex, two digits per byte (a digest finished
/// elsewhere, e.g. from a streaming [`Sha256`]).
pub fn hex_lower(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_empty_input_has_the_known_digest() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(hex_lower(&[0x00, 0xAB]), "00ab");
    }
}
