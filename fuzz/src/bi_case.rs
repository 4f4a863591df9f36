//! Case files (`mxbi-bi-case/1`): any text parses to a case or to a
//! one-line error naming the file; a parsed case prints (serde) to JSON
//! that parses back to the same case; `Case::options` gives a check that
//! passes the limits `bi run` applies (`CheckOptions::validate`), with the
//! content family whenever `standard.bi` is given, or a one-line refusal.
//!
//! Input: the subject's input type (1 byte), two M boundaries (4 bytes
//! each), then the case text.

use super::bytes::{one_line, Take};
use mxbi::bi::Case;
use mxbi::bi::Family;
use mxbi::order::InType;

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let mut r = Take(data);
    let sel = r.u8() as usize;
    let input = InType::ALL.get(sel % (InType::ALL.len() + 1)).copied();
    let bounds = [r.u32() as usize, r.u32() as usize];
    let Ok(text) = std::str::from_utf8(r.rest()) else {
        return false;
    };
    let case = match Case::parse("case.json", text) {
        Ok(c) => c,
        Err(e) => {
            one_line(&e);
            assert!(e.starts_with("case.json: "), "{e}");
            return false;
        }
    };
    let printed = serde_json::to_string(&case).expect("a case serialises");
    let back = Case::parse("case.json", &printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
    assert_eq!(back, case, "{printed}");
    match case.options(input, &bounds) {
        Ok(opts) => {
            opts.validate(case.vs.is_some()).expect("options passed validate once");
            if case.standard.as_ref().is_some_and(|s| s.bi.is_some()) {
                assert!(opts.families.contains(&Family::Content), "{printed}");
            }
            assert!(!opts.ms.is_empty());
        }
        Err(e) => one_line(&e),
    }
    true
}
