//! The explainer's speed benchmark (docs/PERFORMANCE.md): identify the
//! order of one K = 4096 row among the built-in family (over 1,000
//! candidates). Measured, not asserted: run with
//! `cargo test --release --test explain_speed -- --ignored --nocapture`.

use mxbi::explain::candidates::{self, Inputs};
use mxbi::explain::{identify, IdentifyOptions};
use mxbi::gemm::{gemm, BLayout, Matrix, Problem};
use mxbi::order::Order;
use mxbi::rng::SplitMix64;
use std::time::Instant;

#[test]
#[ignore]
fn identify_one_k4096_row_among_the_family() {
    let k = 4096;
    for n in [256usize, 4096] {
        let mut r = SplitMix64::new(5);
        let mut draw = |len: usize| -> Vec<f32> {
            (0..len)
                .map(|_| {
                    f32::from_bits(
                        ((r.next_u32() & 1) << 31)
                            | ((127 + r.range_i64(-6, 6)) as u32) << 23
                            | (r.next_u32() & 0x7F_FFFF),
                    )
                })
                .collect()
        };
        let a = draw(k);
        let b = draw(k * n);
        let p = Problem {
            a: Matrix::F32(&a),
            b: Matrix::F32(&b),
            m: 1,
            n,
            k,
            b_layout: BLayout::Kn,
        };
        let planted = "muladd;ktile=64;split=8/interleave;reduce=pairwise";
        let o: Order = planted.parse().unwrap();
        let c = gemm(&o, &p, None).unwrap();
        let mut totals = Vec::new();
        for _ in 0..5 {
            let t0 = Instant::now();
            let fam = candidates::family(Inputs::of(&p), k);
            let t1 = Instant::now();
            let id = &identify(&p, &[0], &c, &fam, IdentifyOptions::default()).unwrap()[0];
            let t2 = Instant::now();
            assert_eq!(id.order(), Some(o));
            println!(
                "K={k} N={n} planted {planted}: {} candidates ({} evaluated), family built in {:.3} s, identified in {:.3} s, total {:.3} s (threads: {})",
                fam.len(),
                id.evaluated,
                (t1 - t0).as_secs_f64(),
                (t2 - t1).as_secs_f64(),
                (t2 - t0).as_secs_f64(),
                rayon::current_num_threads()
            );
            totals.push((t2 - t0).as_secs_f64());
        }
        totals.sort_by(f64::total_cmp);
        println!(
            "K={k} N={n}: median {:.3} s, min {:.3} s, max {:.3} s over 5 rounds",
            totals[2], totals[0], totals[4]
        );
    }
}
