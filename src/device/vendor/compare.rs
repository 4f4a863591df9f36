//! GPU rows against each other and against the reference: the reference
//! check of an anchor row, row differences, and the anchor tables derived
//! from the stored rows alone.

use super::*;

/// How far a GPU anchor row is from [`reference_row`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReferenceCheck {
    /// The M whose heuristic result was compared.
    pub m: usize,
    pub max_abs_err: f64,
    pub max_abs_ref: f64,
    /// `max_abs_err / max_abs_ref`.
    pub rel: f64,
    pub tolerance: f64,
    pub plausible: bool,
}

pub fn check_reference(case: CaseId, m: usize, row: &[u8], reference: &[f64]) -> ReferenceCheck {
    let dt = case.output();
    let mut max_err = 0f64;
    let mut max_ref = 0f64;
    for (b, r) in row.chunks(dt.bytes()).zip(reference) {
        let y = decode_le(dt, b);
        let e = if y.is_finite() { (y - r).abs() } else { f64::INFINITY };
        max_err = max_err.max(e);
        max_ref = max_ref.max(r.abs());
    }
    let rel = if max_ref > 0.0 { max_err / max_ref } else { max_err };
    let tolerance = case.tolerance();
    ReferenceCheck {
        m,
        max_abs_err: max_err,
        max_abs_ref: max_ref,
        rel: if rel.is_finite() { rel } else { f64::MAX },
        tolerance,
        plausible: rel <= tolerance,
    }
}

fn shape_by_name<'a>(shapes: &'a [Shape], name: &str) -> Result<&'a Shape> {
    shapes
        .iter()
        .find(|s| s.name == name)
        .ok_or_else(|| DeviceError::Capture(format!("unknown shape `{name}`")))
}

pub(super) fn row_bytes<'a>(e: &RowEntry, data: &'a [u8]) -> Result<Option<&'a [u8]>> {
    match (e.offset, e.bytes) {
        (Some(o), Some(b)) => {
            let (o, b) = (o as usize, b as usize);
            data.get(o..o + b).map(Some).ok_or_else(|| {
                DeviceError::Capture(format!(
                    "{} {} M={} {}: bytes {o}..{} outside rows.bin",
                    e.case.name(),
                    e.variant.name(),
                    e.m,
                    e.position,
                    o + b
                ))
            })
        }
        (None, None) => Ok(None),
        _ => Err(DeviceError::Capture("row entry with half an index".into())),
    }
}

/// Differing bytes and differing elements of two rows of `dtype`.
pub fn row_diff(a: &[u8], b: &[u8], dtype: InType) -> (u64, u64) {
    let bytes = a.iter().zip(b).filter(|(x, y)| x != y).count() as u64;
    let elems = a
        .chunks(dtype.bytes())
        .zip(b.chunks(dtype.bytes()))
        .filter(|(x, y)| x != y)
        .count() as u64;
    (bytes, elems)
}

/// The anchor tables, derived from the row entries and `rows.bin` alone:
/// one per (shape, case, variant) in order of first appearance.
pub fn derive_tables(rows: &[RowEntry], data: &[u8], shapes: &[Shape]) -> Result<Vec<CaseTable>> {
    let mut keys: Vec<(String, CaseId, Variant)> = Vec::new();
    for r in rows {
        let k = (r.shape.clone(), r.case, r.variant);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let reference = |shape: &str, case: CaseId, variant: Variant| -> Result<Option<(usize, &[u8])>> {
        let mut best: Option<&RowEntry> = None;
        for r in rows
            .iter()
            .filter(|r| r.shape == shape && r.case == case && r.variant == variant && r.status == RowStatus::Ok)
        {
            if best.is_none_or(|b| (r.m, r.row) < (b.m, b.row)) {
                best = Some(r);
            }
        }
        match best {
            None => Ok(None),
            Some(b) => Ok(row_bytes(b, data)?.map(|bytes| (b.m, bytes))),
        }
    };
    let mut tables = Vec::new();
    for (shape_name, case, variant) in keys {
        let shape = shape_by_name(shapes, &shape_name)?;
        let out = case.output();
        let reference_row = reference(&shape_name, case, variant)?;
        let mut cells = Vec::new();
        for r in rows
            .iter()
            .filter(|r| r.shape == shape_name && r.case == case && r.variant == variant)
        {
            let bytes = row_bytes(r, data)?;
            if let Some(b) = bytes {
                if b.len() != shape.n * out.bytes() {
                    return Err(DeviceError::Capture(format!(
                        "{} M={} {}: row of {} bytes, expected {}",
                        case.name(),
                        r.m,
                        r.position,
                        b.len(),
                        shape.n * out.bytes()
                    )));
                }
            }
            let (diff_bytes, diff_elems) = match (&r.status, bytes, reference_row) {
                (RowStatus::Ok, Some(b), Some((_, rb))) => {
                    let (db, de) = row_diff(rb, b, out);
                    (Some(db), Some(de))
                }
                _ => (None, None),
            };
            cells.push(TableCell {
                m: r.m,
                position: r.position.clone(),
                row: r.row,
                status: r.status.short().into(),
                diff_bytes,
                diff_elems,
            });
        }
        let ok_cells = cells.iter().filter(|c| c.diff_bytes.is_some()).count();
        let differing_cells = cells.iter().filter(|c| c.diff_bytes.is_some_and(|d| d > 0)).count();
        let reference_equals_heuristic = if variant == Variant::Pinned {
            match (reference_row, reference(&shape_name, case, Variant::Heuristic)?) {
                (Some((pm, p)), Some((hm, h))) if pm == hm => Some(p == h),
                _ => None,
            }
        } else {
            None
        };
        tables.push(CaseTable {
            case,
            shape: shape_name,
            variant,
            reference_m: reference_row.map(|r| r.0),
            cells,
            ok_cells,
            differing_cells,
            invariant: (ok_cells > 0).then_some(differing_cells == 0),
            reference_equals_heuristic,
        });
    }
    Ok(tables)
}
