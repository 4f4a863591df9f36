//! The order grammar and the size check the CLI applies before compiling:
//! any text parses to an order or to a one-line error; a parsed order
//! prints a canonical form that parses back to the same order and prints
//! itself again; `check_size(K)` never panics for any K, refuses sizes
//! beyond `mxbi::limits` with a message naming the limit, and, where it
//! accepts a moderate size, the compiled tree is well formed: SSA operands,
//! a root inside the tree, each of the K terms consumed exactly once, and
//! nodes plus fused-step slots plus term lists within `MAX_TREE`.
//!
//! Input: K (8 bytes, little-endian), then the order as UTF-8.

use super::bytes::{one_line, Take};
use mxbi::limits::MAX_TREE;
use mxbi::order::{Node, Order};

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let mut r = Take(data);
    let k = r.u64();
    let Ok(s) = std::str::from_utf8(r.rest()) else {
        return false;
    };
    let o = match s.parse::<Order>() {
        Ok(o) => o,
        Err(e) => {
            one_line(&e.to_string());
            return false;
        }
    };
    let canon = o.to_string();
    let again: Order = canon
        .parse()
        .unwrap_or_else(|e| panic!("{s:?}: canonical form {canon:?} does not parse: {e}"));
    assert_eq!(o, again, "{s:?}: canonical form {canon:?} parses to another order");
    assert_eq!(
        again.to_string(),
        canon,
        "{s:?}: the canonical form is not a fixed point"
    );

    // any K, as the CLI's --k arrives
    let big = usize::try_from(k).unwrap_or(usize::MAX);
    if let Err(e) = o.check_size(big) {
        let m = e.to_string();
        one_line(&m);
        assert!(
            m.contains("limit"),
            "{canon} K={big}: a size refusal that names no limit: {m}"
        );
    }
    // a moderate K, compiled when accepted
    let k = (k % 2049) as usize;
    let moderate = o.split <= 4096 && o.lanes <= 4096 && o.mma().is_none_or(|m| m.k <= 4096);
    match o.check_size(k) {
        Ok(()) if moderate => check_tree(&o, k),
        Ok(()) => {}
        Err(e) => {
            let m = e.to_string();
            one_line(&m);
            assert!(m.contains("limit"), "{canon} K={k}: {m}");
        }
    }
    true
}

fn check_tree(o: &Order, k: usize) {
    let t = o.compile(k);
    assert_eq!(t.k, k, "{o} K={k}");
    assert!(
        (t.root as usize) < t.nodes.len(),
        "{o} K={k}: root {} of {} nodes",
        t.root,
        t.nodes.len()
    );
    let mut seen = vec![0u32; k];
    let mut slots = 0usize;
    for (i, n) in t.nodes.iter().enumerate() {
        for a in n.operands() {
            assert!((a as usize) < i, "{o} K={k}: node {i} ({n:?}) reads node {a}");
        }
        for term in n.terms() {
            assert!((term as usize) < k, "{o} K={k}: node {i} consumes term {term}");
            seen[term as usize] += 1;
        }
        if let Node::Fused { ks, .. } = n {
            slots += ks.len();
        }
    }
    if let Some(j) = seen.iter().position(|&c| c != 1) {
        panic!("{o} K={k}: term {j} consumed {} times", seen[j]);
    }
    let used = t.nodes.len() + slots + 2 * k;
    assert!(
        used <= MAX_TREE,
        "{o} K={k}: {used} units accepted by check_size, beyond MAX_TREE"
    );
}
