//! Size limits, stated once.
//!
//! Every size that mxbi allocates or loops over because someone asked for
//! it (a number on the command line, a field of an op spec, a dimension of
//! an empty tensor, a product of dimensions) is checked against these
//! limits before anything is allocated, so that a mistyped or hostile size
//! is one clear error (exit code 2 on the command line), never a panic, an
//! aborted allocation or a hang. Sizes backed by the bytes of an input file
//! are bounded by the file itself (the readers check shape x dtype size
//! against the file length) and are not limited here.
//!
//! The limits are guards against nonsense, not promises that a machine has
//! the memory: a request just under a limit may still need more memory than
//! there is.

/// Largest MX block (elements sharing one scale): 2^20. A quantization
/// worker holds one block of f32 and one of codes.
pub const MAX_BLOCK: usize = 1 << 20;

/// Largest number of elements of an array that mxbi creates from a
/// requested size rather than reads from a file (GEMM outputs, generated op
/// inputs and outputs, the benchmark input), and largest product of the
/// non-zero dimensions of an empty (zero-size) input tensor: 2^30.
pub const MAX_ELEMENTS: usize = 1 << 30;

/// mxbi's K limit: the largest K (the inner dimension of a GEMM, the
/// number of terms summed into one output element) that any command or
/// library entry point accepts: 4,194,304 = 2^22. It is the one K limit of
/// every command (`bi run`, `bi gen`, `fuzz --max-k`, `order`, `gemm`,
/// `trace`, `explain`, op specs) and of the checker, the fuzzer and the
/// order compiler; each refuses a larger K with [`k_limit_error`]'s words.
/// (`reveal` stops earlier, at 65,536 terms: the number of probes it
/// launches grows with K.)
pub const MAX_K: usize = 1 << 22;

/// The error for a K beyond [`MAX_K`], in the user's words, the same from
/// every command: `--k = 5000000: K must be at most 4194304 (mxbi's K
/// limit, mxbi::limits::MAX_K = 2^22)`. `what` names where the K came from
/// (`--k`, `--max-k`, `K`, a spec field).
pub fn k_limit_error(what: &str, k: usize) -> String {
    format!(
        "{what} = {k}: K must be at most {MAX_K} (mxbi's K limit, mxbi::limits::MAX_K = {})",
        show(MAX_K)
    )
}

/// Checks `k <= MAX_K` ([`k_limit_error`] otherwise). K = 0 is left to the
/// caller: some entry points accept an empty inner dimension.
pub fn check_k(what: &str, k: usize) -> Result<(), String> {
    if k > MAX_K {
        return Err(k_limit_error(what, k));
    }
    Ok(())
}

/// Largest compiled reduction tree: 2^24 units, where a unit is a tree node,
/// one slot of a fused (tensor-core) step, or one term index in a part list
/// (see [`crate::order::Order::check_size`]).
pub const MAX_TREE: usize = 1 << 24;

/// Largest world size (number of ranks) of an op spec: 2^10.
pub const MAX_WORLD: usize = 1 << 10;

/// Largest number of output rows of an op, summed over ranks (each row
/// carries a provenance record of a few hundred bytes): 2^20.
pub const MAX_OP_ROWS: usize = 1 << 20;

/// Largest `--reps` and `--warmup` of `mxbi bench`: 2^16.
pub const MAX_REPS: usize = 1 << 16;

/// Largest worker thread count that can be requested: 2^10.
pub const MAX_THREADS: usize = 1 << 10;

/// A power of two as `2^e` when it is one, else the decimal number.
pub fn show(n: usize) -> String {
    if n.is_power_of_two() && n >= 1024 {
        format!("2^{}", n.trailing_zeros())
    } else {
        n.to_string()
    }
}

/// The product of `dims` with zero dimensions counted as 1, or `None` on
/// overflow. It bounds every loop over the dimensions of an array, empty
/// or not.
pub fn nonzero_product(dims: &[usize]) -> Option<usize> {
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d.max(1)))
}

/// Checks that an array of shape `dims` stays within [`MAX_ELEMENTS`]
/// (zero dimensions counted as 1, so an empty array cannot hide huge other
/// dimensions) and returns its element count. `what` names the array in
/// the error.
pub fn check_elements(what: &str, dims: &[usize]) -> Result<usize, String> {
    match nonzero_product(dims) {
        Some(n) if n <= MAX_ELEMENTS => Ok(if dims.contains(&0) { 0 } else { n }),
        Some(n) => Err(format!(
            "{what} {dims:?} spans {n} elements, more than the limit of {} (mxbi::limits::MAX_ELEMENTS)",
            show(MAX_ELEMENTS)
        )),
        None => Err(format!(
            "{what} {dims:?}: the product of the dimensions overflows (limit: {} elements, mxbi::limits::MAX_ELEMENTS)",
            show(MAX_ELEMENTS)
        )),
    }
}

/// Checks `value <= max` for a named size (`--k`, `block`, ...).
pub fn check_at_most(what: &str, value: usize, max: usize, constant: &str) -> Result<(), String> {
    if value > max {
        return Err(format!(
            "{what} = {value} is larger than the limit of {} (mxbi::limits::{constant})",
            show(max)
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_count_zero_dims_as_one_and_catch_overflow() {
        assert_eq!(nonzero_product(&[]), Some(1));
        assert_eq!(nonzero_product(&[0, 5, 0]), Some(5));
        assert_eq!(nonzero_product(&[1 << 40, 1 << 40, 0]), None);
        assert_eq!(check_elements("x", &[3, 0, 7]), Ok(0));
        assert_eq!(check_elements("x", &[1 << 15, 1 << 15]), Ok(1 << 30));
        let e = check_elements("x", &[1 << 15, (1 << 15) + 1]).unwrap_err();
        assert!(e.contains("2^30") && e.contains("MAX_ELEMENTS"), "{e}");
        let e = check_elements("x", &[0, 1 << 31]).unwrap_err();
        assert!(e.contains("2^30"), "{e}");
        assert!(check_elements("x", &[usize::MAX, 2]).unwrap_err().contains("overflows"));
        assert!(check_at_most("--k", MAX_K + 1, MAX_K, "MAX_K")
            .unwrap_err()
            .contains("2^22"));
        assert!(check_at_most("--k", MAX_K, MAX_K, "MAX_K").is_ok());
        assert_eq!(
            check_k("--k", MAX_K + 1).unwrap_err(),
            "--k = 4194305: K must be at most 4194304 (mxbi's K limit, mxbi::limits::MAX_K = 2^22)"
        );
        assert!(check_k("--k", MAX_K).is_ok() && check_k("--k", 0).is_ok());
        assert_eq!(show(1000), "1000");
    }
}
