//! Tests of the tensor file layer (`mxbi::io`).

mod common;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use mxbi::io::{
    list_tensors, load_tensor, npy_header_bytes, read_npy, read_npy_bytes, read_npy_header, write_npy,
    write_safetensors, write_tensor, DType, IoError, NpyWriter, SafetensorsFile, TensorData,
};
use proptest::prelude::*;

// ---------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------

use common::fresh_dir as tmpdir;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/npy").join(name)
}

/// Deterministic pseudo-random bytes.
fn pattern(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Build an .npy image by hand with the given version and header text.
fn npy_image(version: u8, header: &str, data: &[u8]) -> Vec<u8> {
    let len_size = if version == 1 { 2 } else { 4 };
    let mut h = header.as_bytes().to_vec();
    // pad to 16 like old numpy, terminated by '\n'
    while !(8 + len_size + h.len() + 1).is_multiple_of(16) {
        h.push(b' ');
    }
    h.push(b'\n');
    let mut out = b"\x93NUMPY".to_vec();
    out.push(version);
    out.push(0);
    if version == 1 {
        out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(h.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

fn hdr(descr: &str, fortran: bool, shape: &str) -> String {
    let f = if fortran { "True" } else { "False" };
    format!("{{'descr': '{descr}', 'fortran_order': {f}, 'shape': {shape}, }}")
}

fn write_file(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn err_msg<T: std::fmt::Debug>(r: Result<T, IoError>) -> String {
    let e = r.expect_err("expected an error");
    let m = e.to_string();
    assert!(!m.contains('\n'), "error message must be one line: {m:?}");
    m
}

const NPY_DTYPES: [DType; 8] = [
    DType::F32,
    DType::F64,
    DType::F16,
    DType::U8,
    DType::U16,
    DType::I8,
    DType::I32,
    DType::I64,
];

const SHAPES: &[&[usize]] = &[
    &[],
    &[0],
    &[1],
    &[7],
    &[2, 3],
    &[0, 3],
    &[3, 0, 2],
    &[2, 1, 3],
    &[1, 1, 1, 1],
    &[4, 5, 3],
];

// ---------------------------------------------------------------------------
// dtype
// ---------------------------------------------------------------------------

#[test]
fn dtype_properties() {
    let sizes = [4, 8, 2, 2, 1, 2, 1, 4, 8, 1, 1];
    for (d, s) in DType::ALL.iter().zip(sizes) {
        assert_eq!(d.size(), s, "{d}");
        assert_eq!(DType::from_name(d.name()), Some(*d));
        assert_eq!(d.name().parse::<DType>().unwrap(), *d);
        assert_eq!(DType::from_safetensors_name(d.safetensors_name()), Some(*d));
        assert_eq!(DType::from_name(d.safetensors_name()), Some(*d));
    }
    assert_eq!(DType::from_name("bfloat16"), Some(DType::BF16));
    assert_eq!(DType::from_name("float8_e4m3fn"), Some(DType::F8E4M3));
    assert_eq!(DType::from_name("E5M2"), Some(DType::F8E5M2));
    assert!("f128".parse::<DType>().is_err());
    assert_eq!(DType::BF16.npy_descr(), None);
    assert_eq!(DType::U8.npy_descr(), Some("|u1"));
}

// ---------------------------------------------------------------------------
// npy round trips
// ---------------------------------------------------------------------------

#[test]
fn npy_roundtrip_every_dtype_and_shape() {
    let dir = tmpdir("npy-rt");
    for (i, &dt) in NPY_DTYPES.iter().enumerate() {
        for (j, &shape) in SHAPES.iter().enumerate() {
            let data = pattern(numel(shape) * dt.size(), (i * 100 + j) as u64);
            let p = dir.join(format!("{dt}_{j}.npy"));
            write_npy(&p, dt, shape, &data).unwrap();
            let raw = std::fs::read(&p).unwrap();
            let h = read_npy_header(&p).unwrap();
            assert_eq!(h.version, (1, 0));
            assert_eq!(h.data_offset % 64, 0, "header padded to 64 bytes");
            assert_eq!(raw.len(), h.data_offset + data.len());
            assert_eq!(raw[h.data_offset - 1], b'\n');
            let t = read_npy(&p).unwrap();
            assert_eq!(t.dtype(), dt);
            assert_eq!(t.shape(), shape);
            assert_eq!(t.bytes(), &data[..]);
            assert_eq!(t.numel(), numel(shape));
            assert!(t.is_mapped());
            // In-memory reader agrees.
            let t2 = read_npy_bytes(&raw).unwrap();
            assert_eq!(t2.bytes(), &data[..]);
            assert_eq!(t2.shape(), shape);
        }
    }
}

#[test]
fn npy_typed_values_roundtrip() {
    let dir = tmpdir("npy-typed");
    let f: Vec<f32> = vec![1.5, -2.0, f32::INFINITY, 0.0, -0.0, 3.0e-40];
    let t = TensorData::from_slice(vec![2, 3], &f).unwrap();
    let p = dir.join("f.npy");
    write_tensor(&p, "ignored", &t).unwrap();
    let r = read_npy(&p).unwrap();
    let v = r.as_f32().unwrap();
    assert!(matches!(v, Cow::Borrowed(_)), "aligned mmap should borrow");
    assert_eq!(
        v.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        f.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    );
    assert_eq!(r.to_f32_vec().len(), 6);
    assert!(r.as_f64().is_err());
    assert!(r.as_u8().is_err());

    let i: Vec<i64> = vec![i64::MIN, -1, 0, i64::MAX];
    let t = TensorData::from_slice(vec![4], &i).unwrap();
    let p = dir.join("i.npy");
    write_tensor(&p, "", &t).unwrap();
    assert_eq!(&*read_npy(&p).unwrap().as_i64().unwrap(), &i[..]);

    let h: Vec<f16> = [1.0f32, -0.5, 65504.0].iter().map(|&x| f16::from_f32(x)).collect();
    let t = TensorData::from_slice(vec![3], &h).unwrap();
    let p = dir.join("h.npy");
    write_tensor(&p, "", &t).unwrap();
    let r = read_npy(&p).unwrap();
    assert_eq!(&*r.as_f16().unwrap(), &h[..]);
    assert_eq!(r.to_f32_vec(), vec![1.0, -0.5, 65504.0]);
    assert_eq!(
        &*r.as_bits16().unwrap(),
        &h.iter().map(|x| x.to_bits()).collect::<Vec<_>>()[..]
    );
}

#[test]
fn npy_rejects_bf16_and_fp8_on_write() {
    let dir = tmpdir("npy-nr");
    for dt in [DType::BF16, DType::F8E4M3, DType::F8E5M2] {
        let p = dir.join("x.npy");
        let m = err_msg(write_npy(&p, dt, &[2], &vec![0u8; 2 * dt.size()]));
        assert!(m.contains("x.npy") && m.contains(dt.name()), "{m}");
        assert!(npy_header_bytes(dt, &[2]).is_none());
    }
}

#[test]
fn npy_write_size_mismatch() {
    let dir = tmpdir("npy-size");
    let m = err_msg(write_npy(dir.join("a.npy"), DType::F32, &[2, 2], &[0u8; 15]));
    assert!(m.contains("16") && m.contains("15"), "{m}");
    let m = err_msg(write_npy(dir.join("b.npy"), DType::F64, &[usize::MAX, 2], &[]));
    assert!(m.contains("b.npy"), "{m}");
}

// ---------------------------------------------------------------------------
// npy header versions and dialects
// ---------------------------------------------------------------------------

#[test]
fn npy_header_versions_1_2_3() {
    let data: Vec<u8> = [1.0f32, 2.0, 3.0].iter().flat_map(|x| x.to_le_bytes()).collect();
    for v in [1u8, 2, 3] {
        let img = npy_image(v, &hdr("<f4", false, "(3,)"), &data);
        let t = read_npy_bytes(&img).unwrap();
        assert_eq!(t.dtype(), DType::F32);
        assert_eq!(t.shape(), &[3]);
        assert_eq!(t.to_f32_vec(), vec![1.0, 2.0, 3.0]);
    }
    // A version 3.0 header must be valid UTF-8.
    let mut img = npy_image(3, &hdr("<f4", false, "(3,)"), &data);
    img[12] = 0xFF;
    assert!(read_npy_bytes(&img).is_err());
    // Unsupported versions.
    for (a, b) in [(0u8, 0u8), (1, 1), (4, 0), (255, 255)] {
        let mut img = npy_image(1, &hdr("<f4", false, "(3,)"), &data);
        img[6] = a;
        img[7] = b;
        let m = err_msg(read_npy_bytes(&img));
        assert!(m.contains("version"), "{m}");
    }
}

#[test]
fn npy_header_dialects_accepted() {
    let d4 = [1u8, 2, 3, 4];
    let cases: &[(&str, DType, &[usize])] = &[
        (
            "{'descr': '|u1', 'fortran_order': False, 'shape': (4,), }",
            DType::U8,
            &[4],
        ),
        (
            "{'descr': 'u1', 'fortran_order': False, 'shape': (4,)}",
            DType::U8,
            &[4],
        ),
        (
            "{'descr': '<u1', 'fortran_order': False, 'shape': (2, 2)}",
            DType::U8,
            &[2, 2],
        ),
        (
            "{'descr': '>i1', 'fortran_order': False, 'shape': (4,)}",
            DType::I8,
            &[4],
        ),
        (
            "{\"descr\": \"|i1\", \"fortran_order\": False, \"shape\": (4,)}",
            DType::I8,
            &[4],
        ),
        (
            "{'shape': (4,), 'fortran_order': False, 'descr': '|u1'}",
            DType::U8,
            &[4],
        ),
        (
            "{ 'descr' : '|u1' ,\t'fortran_order':False,'shape':( 2 , 2 , ) , }",
            DType::U8,
            &[2, 2],
        ),
        (
            "{'descr': '|u1', 'fortran_order': False, 'shape': (4L,), }",
            DType::U8,
            &[4],
        ),
        (
            "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }",
            DType::U16,
            &[2],
        ),
        (
            "{'descr': '<i4', 'fortran_order': False, 'shape': (), }",
            DType::I32,
            &[],
        ),
        (
            "{'descr': '<f2', 'fortran_order': False, 'shape': (1, 2), }",
            DType::F16,
            &[1, 2],
        ),
        // Fortran order with at most one non-trivial axis is the same layout.
        (
            "{'descr': '|u1', 'fortran_order': True, 'shape': (4,), }",
            DType::U8,
            &[4],
        ),
        (
            "{'descr': '|u1', 'fortran_order': True, 'shape': (1, 4, 1), }",
            DType::U8,
            &[1, 4, 1],
        ),
    ];
    for (h, dt, shape) in cases {
        let img = npy_image(1, h, &d4);
        let t = read_npy_bytes(&img).unwrap_or_else(|e| panic!("{h}: {e}"));
        assert_eq!(t.dtype(), *dt, "{h}");
        assert_eq!(t.shape(), *shape, "{h}");
        assert_eq!(t.bytes(), &d4[..t.nbytes()], "{h}");
    }
    // Trailing bytes after the data are ignored (as numpy does).
    let img = npy_image(1, &hdr("|u1", false, "(2,)"), &d4);
    assert_eq!(read_npy_bytes(&img).unwrap().bytes(), &[1, 2]);
}

#[test]
fn npy_fortran_order_rejected() {
    let dir = tmpdir("npy-fortran");
    let p = write_file(&dir, "f.npy", &npy_image(1, &hdr("<f4", true, "(2, 3)"), &[0u8; 24]));
    let e = read_npy(&p).unwrap_err();
    assert!(matches!(e, IoError::FortranOrder { .. }));
    let m = e.to_string();
    assert!(
        m.starts_with(&p.display().to_string()) && m.contains("fortran_order"),
        "{m}"
    );
}

#[test]
fn npy_big_endian_and_unsupported_rejected() {
    let dir = tmpdir("npy-unsup");
    for (descr, what) in [
        (">f4", "big-endian"),
        (">i8", "big-endian"),
        (">u2", "big-endian"),
        ("|b1", "bool"),
        ("|O", "object"),
        ("<c8", "complex"),
        ("<U3", "string"),
        ("<M8[ns]", "datetime"),
        ("<u4", ""),
        ("<f16", ""),
        ("f4", "byte order"),
        ("|f4", "byte order"),
    ] {
        let p = write_file(&dir, "input.npy", &npy_image(1, &hdr(descr, false, "(2,)"), &[0u8; 64]));
        let e = read_npy(&p).unwrap_err();
        assert!(matches!(e, IoError::UnsupportedDtype { .. }), "{descr}: {e}");
        let m = e.to_string();
        assert!(
            m.starts_with(&format!("{}: unsupported dtype '{descr}'", p.display())),
            "{m}"
        );
        assert!(m.contains(what) && m.contains("supported: <f4"), "{m}");
    }
    // The exact message format for the common case.
    let p = write_file(&dir, "input.npy", &npy_image(1, &hdr(">f4", false, "(2,)"), &[0u8; 8]));
    assert_eq!(
        read_npy(&p).unwrap_err().to_string(),
        format!(
            "{}: unsupported dtype '>f4' (big-endian); supported: <f4, <f8, <f2, |u1, <u2, |i1, <i4, <i8",
            p.display()
        )
    );
    // Structured dtype.
    let h = "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (2,), }";
    let m = err_msg(read_npy_bytes(&npy_image(1, h, &[0u8; 16])));
    assert!(m.contains("structured"), "{m}");
}

#[test]
fn npy_truncated_rejected() {
    let dir = tmpdir("npy-trunc");
    let p = write_file(
        &dir,
        "x.npy",
        &npy_image(1, &hdr("<f4", false, "(262144,)"), &[0u8; 1000]),
    );
    let e = read_npy(&p).unwrap_err();
    assert!(matches!(e, IoError::Truncated { .. }));
    assert_eq!(
        e.to_string(),
        format!(
            "{}: truncated: header says 1048576 bytes of data, file has 1000",
            p.display()
        )
    );
    // Truncate a valid file by one byte.
    let q = dir.join("y.npy");
    write_npy(&q, DType::F64, &[3, 3], &[7u8; 72]).unwrap();
    let raw = std::fs::read(&q).unwrap();
    let q2 = write_file(&dir, "y2.npy", &raw[..raw.len() - 1]);
    let m = err_msg(read_npy(&q2));
    assert!(
        m.contains("truncated: header says 72 bytes of data, file has 71"),
        "{m}"
    );
    // Truncated inside the header.
    for cut in [0, 3, 6, 8, 9, 20, 127] {
        let q3 = write_file(&dir, "z.npy", &raw[..cut]);
        let m = err_msg(read_npy(&q3));
        assert!(m.contains("z.npy"), "{m}");
    }
}

#[test]
fn npy_malformed_headers_rejected() {
    let bad_headers = [
        "",
        "{",
        "}",
        "[]",
        "{}",
        "'descr'",
        "{'descr': '<f4', 'fortran_order': False}",
        "{'descr': '<f4', 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'extra': 1}",
        "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': 2}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (0x2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': ('2',)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (None,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",
        "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
        "{'descr': 4, 'fortran_order': False, 'shape': (2,)}",
        "{1: '<f4', 'fortran_order': False, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999999999999999999999,)}",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551616,)}",
        // Sizes that overflow usize.
        "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (18446744073709551615,)}",
        "{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776, 1099511627776, 1099511627776)}",
    ];
    for h in bad_headers {
        let img = npy_image(1, h, &[0u8; 64]);
        let r = read_npy_bytes(&img);
        assert!(r.is_err(), "accepted bad header {h:?}");
        err_msg(r);
    }
    // Deep nesting must not overflow the stack.
    let deep = format!("{}{}", "(".repeat(100_000), ")".repeat(100_000));
    let img = npy_image(2, &deep, &[]);
    err_msg(read_npy_bytes(&img));
    let deep = format!("{{'shape': {}", "[".repeat(60_000));
    err_msg(read_npy_bytes(&npy_image(2, &deep, &[])));
    // Header length running past the end, huge v2 header length.
    let mut img = npy_image(1, &hdr("<f4", false, "(2,)"), &[0u8; 8]);
    img[8] = 0xFF;
    img[9] = 0xFF;
    let m = err_msg(read_npy_bytes(&img));
    assert!(m.contains("header length"), "{m}");
    let mut img = npy_image(2, &hdr("<f4", false, "(2,)"), &[0u8; 8]);
    img[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    err_msg(read_npy_bytes(&img));
}

#[test]
fn npy_garbage_and_empty_files_rejected() {
    let dir = tmpdir("npy-garbage");
    for (i, bytes) in [
        Vec::new(),
        b"\x93NUMPY".to_vec(),
        b"\x93NUMPY\x01".to_vec(),
        b"PK\x03\x04 this is a zip".to_vec(),
        pattern(4096, 1),
        b"\x93NUMPZ\x01\x00\x10\x00{}              \n".to_vec(),
    ]
    .into_iter()
    .enumerate()
    {
        let p = write_file(&dir, &format!("g{i}.npy"), &bytes);
        let m = err_msg(read_npy(&p));
        assert!(m.starts_with(&p.display().to_string()), "{m}");
        err_msg(read_npy_bytes(&bytes));
    }
    let m = err_msg(read_npy(dir.join("missing.npy")));
    assert!(m.contains("missing.npy"), "{m}");
    // A directory is not a file.
    err_msg(read_npy(&dir));
}

// ---------------------------------------------------------------------------
// streaming writer
// ---------------------------------------------------------------------------

#[test]
fn npy_streamed_write_matches_one_shot() {
    let dir = tmpdir("npy-stream");
    let shape = [37usize, 11, 3];
    let data = pattern(numel(&shape) * 4, 42);
    let one = dir.join("one.npy");
    write_npy(&one, DType::F32, &shape, &data).unwrap();
    for chunk in [1usize, 7, 64, 1000, data.len()] {
        let p = dir.join(format!("stream{chunk}.npy"));
        let mut w = NpyWriter::create(&p, DType::F32, &shape).unwrap();
        assert_eq!(w.bytes_expected(), data.len() as u64);
        for c in data.chunks(chunk) {
            w.write_chunk(c).unwrap();
        }
        w.write_chunk(&[]).unwrap();
        assert_eq!(w.bytes_written(), data.len() as u64);
        w.finish().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&one).unwrap());
    }
    // Through std::io::Write.
    let p = dir.join("copy.npy");
    let mut w = NpyWriter::create(&p, DType::F32, &shape).unwrap();
    std::io::copy(&mut &data[..], &mut w).unwrap();
    w.finish().unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&one).unwrap());
}

#[test]
fn npy_streamed_write_size_checked() {
    let dir = tmpdir("npy-stream-bad");
    let p = dir.join("short.npy");
    let mut w = NpyWriter::create(&p, DType::I32, &[4]).unwrap();
    w.write_chunk(&[0u8; 12]).unwrap();
    let m = err_msg(w.finish());
    assert!(m.contains("short.npy") && m.contains("12") && m.contains("16"), "{m}");
    // The unfinished file is rejected by the reader.
    assert!(matches!(read_npy(&p).unwrap_err(), IoError::Truncated { .. }));

    let p = dir.join("long.npy");
    let mut w = NpyWriter::create(&p, DType::I32, &[4]).unwrap();
    w.write_chunk(&[0u8; 10]).unwrap();
    let m = err_msg(w.write_chunk(&[0u8; 7]));
    assert!(m.contains("exceed"), "{m}");
    w.write_chunk(&[0u8; 6]).unwrap();
    w.finish().unwrap();
    assert_eq!(read_npy(&p).unwrap().shape(), &[4]);

    // Scalars and zero-size arrays.
    let p = dir.join("empty.npy");
    NpyWriter::create(&p, DType::F64, &[0, 5]).unwrap().finish().unwrap();
    let t = read_npy(&p).unwrap();
    assert_eq!((t.shape(), t.numel(), t.nbytes()), (&[0usize, 5][..], 0, 0));
    assert!(t.as_f64().unwrap().is_empty());
    let p = dir.join("scalar.npy");
    let mut w = NpyWriter::create(&p, DType::F64, &[]).unwrap();
    w.write_chunk(&2.5f64.to_le_bytes()).unwrap();
    w.finish().unwrap();
    let t = read_npy(&p).unwrap();
    assert_eq!((t.ndim(), t.numel()), (0, 1));
    assert_eq!(t.to_f64_vec(), vec![2.5]);

    assert!(NpyWriter::create(dir.join("bf.npy"), DType::BF16, &[1]).is_err());
    assert!(NpyWriter::create(dir.join("no/such/dir/x.npy"), DType::F32, &[1]).is_err());
}

#[test]
fn npy_large_header_uses_version_2() {
    // Each "1, " is 3 bytes: 30000 dims push the header past the u16 limit.
    let shape = vec![1usize; 30_000];
    let h = npy_header_bytes(DType::U8, &shape).unwrap();
    assert_eq!(&h[6..8], &[2, 0]);
    assert_eq!(h.len() % 64, 0);
    let mut img = h;
    img.push(9);
    let t = read_npy_bytes(&img).unwrap();
    assert_eq!(t.shape().len(), 30_000);
    assert_eq!(t.bytes(), &[9]);
}

// ---------------------------------------------------------------------------
// numpy-written fixtures
// ---------------------------------------------------------------------------

#[test]
fn numpy_fixtures_read_correctly() {
    let t = read_npy(fixture("f32_2x3.npy")).unwrap();
    assert_eq!(t.shape(), &[2, 3]);
    assert_eq!(&*t.as_f32().unwrap(), &[-1.0, -0.5, 0.0, 0.5, 1.0, 1.5]);

    let t = read_npy(fixture("f64_scalar.npy")).unwrap();
    assert_eq!(t.shape(), &[] as &[usize]);
    assert_eq!(&*t.as_f64().unwrap(), &[3.25]);

    let t = read_npy(fixture("f16_5.npy")).unwrap();
    let v = t.to_f32_vec();
    assert_eq!(&v[..3], &[0.0, -1.5, 65504.0]);
    assert_eq!(v[3], f16::from_f32(6e-8).to_f32());
    assert_eq!(v[4], f32::INFINITY);

    assert_eq!(
        read_npy(fixture("u8_4.npy")).unwrap().as_u8().unwrap(),
        &[0, 1, 128, 255]
    );
    assert_eq!(
        &*read_npy(fixture("i8_4.npy")).unwrap().as_i8().unwrap(),
        &[-128, -1, 0, 127]
    );
    assert_eq!(
        &*read_npy(fixture("u16_3.npy")).unwrap().as_u16().unwrap(),
        &[0, 1000, 65535]
    );
    let t = read_npy(fixture("i32_2x2.npy")).unwrap();
    assert_eq!(t.shape(), &[2, 2]);
    assert_eq!(&*t.as_i32().unwrap(), &[i32::MIN, -1, 0, i32::MAX]);
    assert_eq!(
        &*read_npy(fixture("i64_3.npy")).unwrap().as_i64().unwrap(),
        &[i64::MIN, 0, i64::MAX]
    );
    let t = read_npy(fixture("f32_0x4.npy")).unwrap();
    assert_eq!((t.shape(), t.nbytes()), (&[0usize, 4][..], 0));
    let t = read_npy(fixture("f32_1x1x1x2.npy")).unwrap();
    assert_eq!(t.shape(), &[1, 1, 1, 2]);
    for (name, v) in [("f32_v2.npy", (2, 0)), ("f32_v3.npy", (3, 0))] {
        let h = read_npy_header(fixture(name)).unwrap();
        assert_eq!(h.version, v);
        assert_eq!(read_npy(fixture(name)).unwrap().to_f32_vec(), vec![1.0, 2.0, 3.0]);
    }
}

#[test]
fn numpy_fixtures_byte_identical_to_our_writer() {
    let dir = tmpdir("npy-ident");
    for name in [
        "f32_2x3.npy",
        "f64_scalar.npy",
        "f16_5.npy",
        "u8_4.npy",
        "i8_4.npy",
        "u16_3.npy",
        "i32_2x2.npy",
        "i64_3.npy",
        "f32_0x4.npy",
        "f32_1x1x1x2.npy",
    ] {
        let t = read_npy(fixture(name)).unwrap();
        let p = dir.join(name);
        write_npy(&p, t.dtype(), t.shape(), t.bytes()).unwrap();
        assert_eq!(
            std::fs::read(&p).unwrap(),
            std::fs::read(fixture(name)).unwrap(),
            "{name}"
        );
    }
}

#[test]
fn numpy_fixtures_unsupported_rejected() {
    let m = err_msg(read_npy(fixture("fortran_2x3.npy")));
    assert!(m.contains("fortran_2x3.npy") && m.contains("fortran_order"), "{m}");
    let m = err_msg(read_npy(fixture("bigendian_f4.npy")));
    assert!(m.contains("'>f4' (big-endian)"), "{m}");
    let m = err_msg(read_npy(fixture("bool_2.npy")));
    assert!(m.contains("'|b1'"), "{m}");
    let m = err_msg(read_npy(fixture("structured.npy")));
    assert!(m.contains("structured"), "{m}");
}

// ---------------------------------------------------------------------------
// safetensors
// ---------------------------------------------------------------------------

#[test]
fn safetensors_roundtrip_all_dtypes() {
    let dir = tmpdir("st-rt");
    let mut owned: Vec<(String, DType, Vec<usize>, Vec<u8>)> = Vec::new();
    for (i, &dt) in DType::ALL.iter().enumerate() {
        for (j, &shape) in SHAPES.iter().enumerate().step_by(2) {
            let data = pattern(numel(shape) * dt.size(), (i * 31 + j) as u64);
            owned.push((format!("{dt}.{j}"), dt, shape.to_vec(), data));
        }
    }
    let raw: Vec<(&str, DType, &[usize], &[u8])> = owned
        .iter()
        .map(|(n, d, s, b)| (n.as_str(), *d, s.as_slice(), b.as_slice()))
        .collect();
    let mut meta = HashMap::new();
    meta.insert("format".to_string(), "pt".to_string());
    meta.insert("source".to_string(), "mxbi test".to_string());
    let p = dir.join("all.safetensors");
    write_safetensors(&p, &raw, Some(&meta)).unwrap();

    let f = SafetensorsFile::open(&p).unwrap();
    assert_eq!(f.len(), owned.len());
    assert_eq!(f.metadata(), Some(&meta));
    for (n, d, s, b) in &owned {
        let t = f.tensor(n).unwrap();
        assert_eq!(t.dtype(), *d, "{n}");
        assert_eq!(t.shape(), &s[..], "{n}");
        assert_eq!(t.bytes(), &b[..], "{n}");
        assert!(t.is_mapped());
        let t2 = load_tensor(&p, Some(n)).unwrap();
        assert_eq!(t2.bytes(), &b[..]);
    }
    let entries = list_tensors(&p).unwrap();
    assert_eq!(entries.len(), owned.len());
    let mut names: Vec<&str> = f.names();
    names.sort();
    let mut expect: Vec<&str> = owned.iter().map(|o| o.0.as_str()).collect();
    expect.sort();
    assert_eq!(names, expect);
    let all = f.tensors().unwrap();
    assert_eq!(all.len(), owned.len());
}

#[test]
fn safetensors_fp8_bf16_roundtrip() {
    let dir = tmpdir("st-fp8");
    let e4m3: Vec<u8> = vec![0x00, 0x38, 0x7E, 0x01, 0xB8, 0x7F, 0x08, 0xFE];
    let e5m2: Vec<u8> = vec![0x3C, 0x7C, 0x7B, 0xFC, 0x01, 0x00];
    let b: Vec<bf16> = [1.0f32, -2.5, 3.0e38, 1.0e-40]
        .iter()
        .map(|&x| bf16::from_f32(x))
        .collect();
    let bbytes: Vec<u8> = b.iter().flat_map(|x| x.to_le_bytes()).collect();
    let p = dir.join("m.safetensors");
    write_safetensors(
        &p,
        &[
            ("w.e4m3", DType::F8E4M3, &[2, 4], &e4m3),
            ("w.e5m2", DType::F8E5M2, &[6], &e5m2),
            ("scale", DType::BF16, &[2, 2], &bbytes),
        ],
        None,
    )
    .unwrap();
    let f = SafetensorsFile::open(&p).unwrap();
    assert!(f.metadata().is_none());
    let t = f.tensor("w.e4m3").unwrap();
    assert_eq!((t.dtype(), t.shape()), (DType::F8E4M3, &[2usize, 4][..]));
    assert_eq!(t.as_bits8().unwrap(), &e4m3[..]);
    assert!(t.as_u8().is_err());
    let v = t.to_f32_vec();
    assert_eq!(&v[..5], &[0.0, 1.0, 448.0, 2f32.powi(-9), -1.0]);
    assert!(v[5].is_nan());
    assert_eq!(v[6], 2f32.powi(-6)); // smallest normal
    assert_eq!(v[7], -448.0);

    let t = f.tensor("w.e5m2").unwrap();
    let v = t.to_f32_vec();
    assert_eq!(
        &v[..5],
        &[1.0, f32::INFINITY, 57344.0, f32::NEG_INFINITY, 2f32.powi(-16)]
    );

    let t = f.tensor("scale").unwrap();
    assert_eq!(&*t.as_bf16().unwrap(), &b[..]);
    assert_eq!(t.to_f32_vec(), b.iter().map(|x| x.to_f32()).collect::<Vec<_>>());
    assert!(t.as_f16().is_err());
}

#[test]
fn safetensors_name_selection() {
    let dir = tmpdir("st-names");
    let one = dir.join("one.safetensors");
    write_safetensors(&one, &[("only", DType::F32, &[2], &[0u8; 8])], None).unwrap();
    assert_eq!(load_tensor(&one, None).unwrap().shape(), &[2]);
    assert_eq!(load_tensor(&one, Some("only")).unwrap().shape(), &[2]);

    let two = dir.join("two.safetensors");
    write_safetensors(
        &two,
        &[("a", DType::F32, &[2], &[0u8; 8]), ("b", DType::I8, &[3], &[1u8; 3])],
        None,
    )
    .unwrap();
    let e = load_tensor(&two, None).unwrap_err();
    assert!(matches!(e, IoError::NameRequired { count: 2, .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("two.safetensors") && m.contains("'a'") && m.contains("'b'"),
        "{m}"
    );
    assert_eq!(load_tensor(&two, Some("b")).unwrap().as_i8().unwrap().len(), 3);
    let e = load_tensor(&two, Some("c")).unwrap_err();
    assert!(matches!(e, IoError::TensorNotFound { .. }));
    assert!(e.to_string().contains("no tensor named 'c'"), "{e}");

    let empty = dir.join("empty.safetensors");
    write_safetensors(&empty, &[], None).unwrap();
    assert!(matches!(load_tensor(&empty, None).unwrap_err(), IoError::Empty { .. }));
}

#[test]
fn safetensors_write_validation() {
    let dir = tmpdir("st-wv");
    let p = dir.join("x.safetensors");
    let m = err_msg(write_safetensors(&p, &[("a", DType::F32, &[3], &[0u8; 8])], None));
    assert!(m.contains("'a'") && m.contains("12") && m.contains('8'), "{m}");
    let m = err_msg(write_safetensors(
        &p,
        &[("a", DType::U8, &[1], &[0]), ("a", DType::U8, &[1], &[0])],
        None,
    ));
    assert!(m.contains("duplicate"), "{m}");
    err_msg(write_safetensors(&p, &[("__metadata__", DType::U8, &[1], &[0])], None));
    err_msg(write_safetensors(
        &p,
        &[("big", DType::U8, &[usize::MAX, 2], &[])],
        None,
    ));
}

/// Build a safetensors file by hand.
fn st_image(header: &str, data: &[u8]) -> Vec<u8> {
    let mut h = header.as_bytes().to_vec();
    while !h.len().is_multiple_of(8) {
        h.push(b' ');
    }
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

#[test]
fn safetensors_unsupported_dtypes() {
    let dir = tmpdir("st-unsup");
    let p = write_file(
        &dir,
        "b.safetensors",
        &st_image(
            r#"{"mask":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]},"x":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}"#,
            &[1, 0, 7],
        ),
    );
    let f = SafetensorsFile::open(&p).unwrap();
    let e = &f.entries()[0];
    assert_eq!(
        (e.name.as_str(), e.dtype, e.dtype_name.as_str()),
        ("mask", None, "BOOL")
    );
    assert_eq!(f.tensor("x").unwrap().as_u8().unwrap(), &[7]);
    let m = err_msg(f.tensor("mask"));
    assert!(
        m.starts_with(&format!("{}: unsupported dtype 'BOOL'", p.display())) && m.contains("F8_E4M3"),
        "{m}"
    );
    assert!(f.tensors().is_err());

    let p = write_file(
        &dir,
        "f4.safetensors",
        &st_image(r#"{"x":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}}"#, &[0]),
    );
    let m = err_msg(SafetensorsFile::open(&p));
    assert!(m.contains("unsupported dtype 'F4'"), "{m}");
}

#[test]
fn safetensors_misaligned_tensor_copies() {
    let dir = tmpdir("st-align");
    let mut data = vec![9u8];
    for x in [1.0f32, 2.0, -3.0, 4.5] {
        data.extend_from_slice(&x.to_le_bytes());
    }
    let p = write_file(
        &dir,
        "m.safetensors",
        &st_image(
            r#"{"b":{"dtype":"U8","shape":[],"data_offsets":[0,1]},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[1,17]}}"#,
            &data,
        ),
    );
    let f = SafetensorsFile::open(&p).unwrap();
    assert_eq!(f.names(), vec!["b", "w"]);
    let w = f.tensor("w").unwrap();
    let v = w.as_f32().unwrap();
    assert!(matches!(v, Cow::Owned(_)), "misaligned data must be copied");
    assert_eq!(&*v, &[1.0, 2.0, -3.0, 4.5]);
    let b = f.tensor("b").unwrap();
    assert_eq!((b.ndim(), b.as_u8().unwrap()), (0, &[9u8][..]));
    let owned = w.into_owned();
    assert!(!owned.is_mapped());
    assert_eq!(&*owned.as_f32().unwrap(), &[1.0, 2.0, -3.0, 4.5]);
}

#[test]
fn safetensors_malformed_rejected() {
    let dir = tmpdir("st-bad");
    let good = {
        let p = dir.join("good.safetensors");
        write_safetensors(
            &p,
            &[("a", DType::F32, &[4], &[1u8; 16]), ("b", DType::U8, &[3], &[2u8; 3])],
            None,
        )
        .unwrap();
        std::fs::read(&p).unwrap()
    };
    let mut cases: Vec<Vec<u8>> = vec![
        Vec::new(),
        vec![1, 2, 3],
        u64::MAX.to_le_bytes().to_vec(),
        1000u64.to_le_bytes().to_vec(),
        st_image("not json", &[]),
        st_image("[1,2]", &[]),
        st_image(r#"{"a":5}"#, &[]),
        st_image(r#"{"a":{"dtype":"F32","shape":[1]}}"#, &[0; 4]),
        st_image(r#"{"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}}"#, &[0; 4]),
        st_image(r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#, &[0; 4]),
        st_image(r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}}"#, &[0; 4]),
        st_image(r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#, &[0; 5]),
        st_image(r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#, &[0; 3]),
        st_image(
            r#"{"a":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,18446744073709551615]}}"#,
            &[0; 4],
        ),
        st_image(
            r#"{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[18446744073709551612],"data_offsets":[4,18446744073709551615]}}"#,
            &[0; 4],
        ),
        st_image(
            r#"{"a":{"dtype":"F64","shape":[4611686018427387904, 4],"data_offsets":[0,0]}}"#,
            &[],
        ),
        st_image(r#"{"__metadata__":{"k":1}}"#, &[]),
        pattern(500, 7),
    ];
    for cut in [0, 7, 8, 20, good.len() - 1] {
        cases.push(good[..cut].to_vec());
    }
    let mut extra = good.clone();
    extra.push(0);
    cases.push(extra);
    for (i, bytes) in cases.iter().enumerate() {
        let p = write_file(&dir, &format!("c{i}.safetensors"), bytes);
        let m = err_msg(SafetensorsFile::open(&p));
        assert!(m.starts_with(&p.display().to_string()), "case {i}: {m}");
        err_msg(load_tensor(&p, Some("a")));
    }
}

// ---------------------------------------------------------------------------
// dispatch
// ---------------------------------------------------------------------------

#[test]
fn load_tensor_dispatch() {
    let dir = tmpdir("dispatch");
    let t = TensorData::from_slice(vec![3], &[1i32, 2, 3]).unwrap();
    let npy = dir.join("t.NPY");
    write_tensor(&npy, "t", &t).unwrap();
    assert_eq!(&*load_tensor(&npy, None).unwrap().as_i32().unwrap(), &[1, 2, 3]);
    assert_eq!(
        &*load_tensor(&npy, Some("ignored")).unwrap().as_i32().unwrap(),
        &[1, 2, 3]
    );
    let st = dir.join("t.safetensors");
    write_tensor(&st, "t", &t).unwrap();
    assert_eq!(&*load_tensor(&st, None).unwrap().as_i32().unwrap(), &[1, 2, 3]);
    let l = list_tensors(&npy).unwrap();
    assert_eq!(l[0].name, "t");
    assert_eq!(l[0].dtype_name, "<i4");
    assert_eq!(l[0].shape, vec![3]);
    assert_eq!(l[0].nbytes, 12);

    // Unknown extensions are sniffed.
    std::fs::copy(&npy, dir.join("a.bin")).unwrap();
    std::fs::copy(&st, dir.join("b.bin")).unwrap();
    assert_eq!(load_tensor(dir.join("a.bin"), None).unwrap().shape(), &[3]);
    assert_eq!(load_tensor(dir.join("b.bin"), None).unwrap().shape(), &[3]);
    let junk = write_file(&dir, "c.bin", b"hello world");
    assert!(matches!(
        load_tensor(&junk, None).unwrap_err(),
        IoError::UnknownFormat { .. }
    ));
    assert!(matches!(
        write_tensor(dir.join("out.txt"), "t", &t).unwrap_err(),
        IoError::UnknownFormat { .. }
    ));
    // npy with bf16 cannot be written; safetensors can.
    let b = TensorData::new(DType::BF16, vec![2], vec![0, 0x3f, 0, 0x40]).unwrap();
    assert!(write_tensor(dir.join("b.npy"), "b", &b).is_err());
    write_tensor(dir.join("b.safetensors"), "b", &b).unwrap();
    assert_eq!(
        load_tensor(dir.join("b.safetensors"), None).unwrap().to_f32_vec(),
        vec![0.5, 2.0]
    );
}

#[test]
fn tensor_data_constructors() {
    assert!(TensorData::new(DType::F32, vec![2], vec![0; 7]).is_err());
    assert!(TensorData::new(DType::F32, vec![usize::MAX, 2], vec![]).is_err());
    let t = TensorData::new(DType::I32, vec![], vec![1, 0, 0, 0]).unwrap();
    assert_eq!((t.numel(), t.ndim()), (1, 0));
    assert_eq!(&*t.as_bits32().unwrap(), &[1]);
    assert_eq!(t.to_f64_vec(), vec![1.0]);
    assert!(t.as_bits64().is_err());
    let (d, s, b) = t.into_parts();
    assert_eq!((d, s, b.into_vec()), (DType::I32, vec![], vec![1, 0, 0, 0]));
}

// ---------------------------------------------------------------------------
// property tests: no input bytes make the readers panic
// ---------------------------------------------------------------------------

fn check_invariants(r: Result<TensorData, IoError>, len: usize) {
    match r {
        Ok(t) => {
            assert_eq!(t.nbytes(), t.numel() * t.dtype().size());
            assert!(t.nbytes() <= len);
            let _ = t.to_f64_vec();
        }
        Err(e) => {
            let m = e.to_string();
            assert!(!m.contains('\n'));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn npy_random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let len = bytes.len();
        check_invariants(read_npy_bytes(&bytes), len);
    }

    #[test]
    fn npy_random_headers_never_panic(
        version in prop_oneof![Just(1u8), Just(2u8), Just(3u8), any::<u8>()],
        header in "[{}()\\[\\]'\": ,<>|=a-z_0-9LTFN\\-]{0,120}",
        data in proptest::collection::vec(any::<u8>(), 0..64),
    ) {
        let img = npy_image(version.clamp(1, 3), &header, &data);
        let len = img.len();
        check_invariants(read_npy_bytes(&img), len);
    }

    #[test]
    fn npy_mutated_files_never_panic(
        dt in 0usize..8,
        dims in proptest::collection::vec(0usize..5, 0..4),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let dt = NPY_DTYPES[dt];
        let mut img = npy_header_bytes(dt, &dims).unwrap();
        img.extend(pattern(numel(&dims) * dt.size(), 3));
        for (pos, val) in flips {
            let i = pos % img.len();
            img[i] = val;
        }
        let keep = img.len() - cut % (img.len() / 4 + 1);
        img.truncate(keep);
        let len = img.len();
        check_invariants(read_npy_bytes(&img), len);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn safetensors_mutated_files_never_panic(
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
        random in proptest::collection::vec(any::<u8>(), 0..64),
        use_random in any::<bool>(),
    ) {
        let dir = tmpdir("st-prop");
        let p = dir.join("p.safetensors");
        let img = if use_random {
            random
        } else {
            write_safetensors(
                &p,
                &[("a", DType::F32, &[2, 2], &[1u8; 16]), ("b", DType::BF16, &[3], &[2u8; 6])],
                None,
            )
            .unwrap();
            let mut img = std::fs::read(&p).unwrap();
            for (pos, val) in flips {
                let i = pos % img.len();
                img[i] = val;
            }
            img
        };
        std::fs::write(&p, &img).unwrap();
        if let Ok(f) = SafetensorsFile::open(&p) {
            for n in f.names() {
                check_invariants(f.tensor(n), img.len());
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
