//! The one table of numbers the accuracy standards use ([`TABLE`]):
//! every threshold, limit and default with its source, one row per
//! quantity and a value per output type. docs/ACCURACY.md shows it as
//! rendered by [`table_markdown`], and a test keeps the two equal. The
//! metrics' RE floor and the ULP view's cancellation ratio are rows here
//! too, so every number is in one place.

use crate::io::DType;

/// One value per output type (`None`: the source gives none).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerDtype {
    pub f16: Option<f64>,
    pub bf16: Option<f64>,
    pub f32: Option<f64>,
    pub f64: Option<f64>,
    pub e4m3: Option<f64>,
    pub e5m2: Option<f64>,
}

impl PerDtype {
    /// The same value for every type.
    pub const fn all(v: f64) -> PerDtype {
        PerDtype {
            f16: Some(v),
            bf16: Some(v),
            f32: Some(v),
            f64: Some(v),
            e4m3: Some(v),
            e5m2: Some(v),
        }
    }

    pub fn get(&self, dtype: DType) -> Option<f64> {
        match dtype {
            DType::F16 => self.f16,
            DType::BF16 => self.bf16,
            DType::F32 => self.f32,
            DType::F64 => self.f64,
            DType::F8E4M3 => self.e4m3,
            DType::F8E5M2 => self.e5m2,
            _ => None,
        }
    }

    fn cells(&self) -> [Option<f64>; 6] {
        [self.f16, self.bf16, self.f32, self.f64, self.e4m3, self.e5m2]
    }
}

/// One row of [`TABLE`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Row {
    pub standard: &'static str,
    pub quantity: &'static str,
    pub values: PerDtype,
    pub source: &'static str,
}

const fn p2(e: i32) -> f64 {
    // exact for the small exponents used here
    let mut v = 1.0;
    let mut i = 0;
    if e < 0 {
        while i > e {
            v /= 2.0;
            i -= 1;
        }
    } else {
        while i < e {
            v *= 2.0;
            i += 1;
        }
    }
    v
}

const NONE: PerDtype = PerDtype {
    f16: None,
    bf16: None,
    f32: None,
    f64: None,
    e4m3: None,
    e5m2: None,
};

/// ATK `error_thd[dtype]` (fp64 uses fp32's).
pub const ERROR_THD: Row = Row {
    standard: "atk*",
    quantity: "error_thd",
    values: PerDtype {
        f16: Some(p2(-11)),
        bf16: Some(p2(-8)),
        f32: Some(p2(-14)),
        f64: Some(p2(-14)),
        ..NONE
    },
    source: "§6",
};
/// ATK limit on `|EB(actual)|` (fp64 uses fp32's).
pub const EB_LIMIT: Row = Row {
    standard: "atk, atk-strict",
    quantity: "max abs(EB)",
    values: PerDtype {
        f16: Some(p2(-10)),
        bf16: Some(p2(-7)),
        f32: Some(p2(-14)),
        f64: Some(p2(-14)),
        ..NONE
    },
    source: "§6",
};
pub const ATK_MAXRE: Row = ratio_row("atk, atk-l0", "MaxRE ratio <=", 10.0, "§6");
pub const ATK_AVGRE: Row = ratio_row("atk, atk-l0", "AvgRE ratio <=", 2.0, "§6");
pub const ATK_RMSE: Row = ratio_row("atk, atk-l0", "RMSE ratio <=", 2.0, "§6");
pub const STRICT_MAXRE: Row = ratio_row("atk-strict, atk-l2", "MaxRE ratio <=", 2.0, "§6");
pub const STRICT_AVGRE: Row = ratio_row("atk-strict, atk-l2", "AvgRE ratio <=", 1.2, "§6");
pub const STRICT_RMSE: Row = ratio_row("atk-strict, atk-l2", "RMSE ratio <=", 1.2, "§6");
pub const L1_MAXRE: Row = ratio_row("atk-l1", "MaxRE ratio <=", 5.0, "§6");
pub const L1_AVGRE: Row = ratio_row("atk-l1", "AvgRE ratio <=", 1.5, "§6");
pub const L1_RMSE: Row = ratio_row("atk-l1", "RMSE ratio <=", 1.5, "§6");
/// Single-benchmark `T[dtype]`: pass iff AvgRE < T and MaxRE < 10 T.
pub const SINGLE_T: Row = Row {
    standard: "single",
    quantity: "T",
    values: PerDtype {
        f16: Some(p2(-10)),
        bf16: Some(p2(-7)),
        f32: Some(p2(-13)),
        e4m3: Some(p2(-3)),
        e5m2: Some(p2(-2)),
        ..NONE
    },
    source: "§6",
};
pub const SINGLE_MAXRE_FACTOR: Row = ratio_row("single", "MaxRE < factor x T", 10.0, "§6");
pub const MSPROBE_RMSE_PASS: Row = ratio_row("msprobe", "RMSE ratio pass <=", 1.0, "§11");
pub const MSPROBE_RMSE_WARN: Row = ratio_row("msprobe", "RMSE ratio warn <=", 2.0, "§11");
pub const MSPROBE_MAXRE_PASS: Row = ratio_row("msprobe", "MaxRE ratio pass <=", 1.0, "§11");
pub const MSPROBE_MAXRE_WARN: Row = ratio_row("msprobe", "MaxRE ratio warn <=", 10.0, "§11");
/// msprobe ULP threshold per dtype.
pub const MSPROBE_ULP: Row = Row {
    standard: "msprobe-ulp",
    quantity: "ULP threshold",
    values: PerDtype {
        f16: Some(1.0),
        bf16: Some(1.0),
        f32: Some(32.0),
        ..NONE
    },
    source: "§11",
};
pub const MSPROBE_ULP_SHARE: Row = ratio_row("msprobe-ulp", "share over threshold <", 0.001, "§11");
pub const MSPROBE_BINARY_RATE: Row = ratio_row("msprobe-binary", "error rate <=", 0.0, "§11");
/// PyTorch `assert_close` default rtol.
pub const ASSERT_CLOSE_RTOL: Row = Row {
    standard: "assert-close",
    quantity: "rtol",
    values: PerDtype {
        f16: Some(1e-3),
        bf16: Some(1.6e-2),
        f32: Some(1.3e-6),
        ..NONE
    },
    source: "§11",
};
/// PyTorch `assert_close` default atol.
pub const ASSERT_CLOSE_ATOL: Row = Row {
    standard: "assert-close",
    quantity: "atol",
    values: PerDtype {
        f16: Some(1e-5),
        bf16: Some(1e-5),
        f32: Some(1e-5),
        ..NONE
    },
    source: "§11",
};
/// The `1e-7` in `RE = |a - g| / (|g| + 1e-7)`.
pub const RE_FLOOR_ROW: Row = ratio_row("metrics", "RE denominator floor", 1e-7, "§6");
/// Least `sum|a_k b_k| / |sum a_k b_k|` for the `cancellation` label (ours).
pub const CANCELLATION_ROW: Row = ratio_row("ulp view", "cancellation ratio >=", 2.0, "ours");

const fn ratio_row(standard: &'static str, quantity: &'static str, v: f64, source: &'static str) -> Row {
    Row {
        standard,
        quantity,
        values: PerDtype::all(v),
        source,
    }
}

/// Every number the standards use, in one table.
pub const TABLE: [Row; 24] = [
    ERROR_THD,
    EB_LIMIT,
    ATK_MAXRE,
    ATK_AVGRE,
    ATK_RMSE,
    STRICT_MAXRE,
    STRICT_AVGRE,
    STRICT_RMSE,
    L1_MAXRE,
    L1_AVGRE,
    L1_RMSE,
    SINGLE_T,
    SINGLE_MAXRE_FACTOR,
    MSPROBE_RMSE_PASS,
    MSPROBE_RMSE_WARN,
    MSPROBE_MAXRE_PASS,
    MSPROBE_MAXRE_WARN,
    MSPROBE_ULP,
    MSPROBE_ULP_SHARE,
    MSPROBE_BINARY_RATE,
    ASSERT_CLOSE_RTOL,
    ASSERT_CLOSE_ATOL,
    RE_FLOOR_ROW,
    CANCELLATION_ROW,
];

const fn value_of(row: &Row) -> f64 {
    match row.values.f32 {
        Some(v) => v,
        None => panic!("a row without an f32 value"),
    }
}

/// [`RE_FLOOR_ROW`]'s value.
pub const RE_FLOOR: f64 = value_of(&RE_FLOOR_ROW);
/// [`CANCELLATION_ROW`]'s value.
pub const CANCELLATION_MIN_RATIO: f64 = value_of(&CANCELLATION_ROW);

/// A number as the table shows it: `2^e` for powers of two up to 1/4,
/// scientific below 1e-3, else the shortest decimal.
fn show(v: f64) -> String {
    if v > 0.0 && v <= 0.25 && v.to_bits() & ((1 << 52) - 1) == 0 {
        let e = ((v.to_bits() >> 52) as i32) - 1023;
        return format!("2^{e}");
    }
    if v > 0.0 && v < 1e-3 {
        return format!("{v:e}");
    }
    format!("{v}")
}

/// The table as Markdown (docs/ACCURACY.md holds exactly this).
pub fn table_markdown() -> String {
    let mut s = String::from(
        "| standard | quantity | f16 | bf16 | f32 | f64 | e4m3 | e5m2 | source |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in TABLE {
        let cells: Vec<String> = r.values.cells().iter().map(|c| c.map_or("-".into(), show)).collect();
        s.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            r.standard,
            r.quantity,
            cells.join(" | "),
            r.source
        ));
    }
    s
}
