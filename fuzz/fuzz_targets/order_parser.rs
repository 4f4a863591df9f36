//! Any string: an order parses (and then round-trips through its canonical
//! form and compiles) or gives an error, never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;
use mxbi::order::Order;

fuzz_target!(|s: &str| {
    if let Ok(o) = s.parse::<Order>() {
        let canon = o.to_string();
        let again: Order = canon.parse().expect("canonical form must parse");
        assert_eq!(o, again);
        let _ = o.compile(s.len() % 300);
    }
});
