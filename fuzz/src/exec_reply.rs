//! Runner replies (protocol `mxbi-exec/1`): any greeting line gives the
//! runner's name (1 to 200 printable characters) or a one-line refusal;
//! any answer line to job `id` gives an output or an error answer for that
//! very job, or a one-line reason the runner is broken; an answer prints
//! back to a line that parses to the same answer. The output file a reply
//! names is checked as `exec:` checks it: bounded by the job's `[M, N]`
//! before reading, then dtype (the one claimed) and shape, widened to
//! exactly `M * N` values that keep every bit (f32 data read back as is).
//!
//! Input: job id (1 byte), M and N (1 byte each, 0 to 15), then the lines:
//! greeting, answer, and the rest is the output file's bytes.

use super::bytes::{one_line, Take};
use mxbi::subject::exec::{parse_greeting, parse_reply, read_output_bytes, OutType, Reply};

/// True when the input got past parsing to the property checks.
pub fn run(data: &[u8]) -> bool {
    let mut r = Take(data);
    let id = r.u8() as u64;
    let (m, n) = ((r.u8() % 16) as usize, (r.u8() % 16) as usize);
    let rest = r.rest();
    let mut parts = rest.splitn(3, |&b| b == b'\n');
    let greeting = parts.next().unwrap_or_default();
    let answer = parts.next().unwrap_or_default();
    let file = parts.next().unwrap_or_default();

    if let Ok(g) = std::str::from_utf8(greeting) {
        match parse_greeting(g) {
            Ok(name) => {
                assert!(!name.trim().is_empty() && name.len() <= 200 && !name.chars().any(char::is_control))
            }
            Err(e) => one_line(&e),
        }
    }
    let Ok(line) = std::str::from_utf8(answer) else {
        return false;
    };
    let reply = match parse_reply(line, id) {
        Ok(r) => r,
        Err(e) => {
            one_line(&e);
            return false;
        }
    };
    let printed = match &reply {
        Reply::Error(why) => serde_json::json!({"job": id, "error": why}),
        Reply::Output { out, dtype } => serde_json::json!({"job": id, "out": out, "dtype": dtype.name()}),
    };
    assert_eq!(parse_reply(&printed.to_string(), id).as_ref(), Ok(&reply), "{printed}");
    assert!(
        parse_reply(&printed.to_string(), id + 1).is_err(),
        "an answer to another job was taken"
    );
    let Reply::Output { dtype, .. } = reply else {
        return true;
    };
    match read_output_bytes(file, Some(dtype), m, n) {
        Ok(v) => {
            assert_eq!(v.len(), m * n);
            if dtype == OutType::F32 {
                // the data follows the header (bytes after it are ignored, as numpy does)
                let start = match file[6] {
                    1 => 10 + u16::from_le_bytes([file[8], file[9]]) as usize,
                    _ => 12 + u32::from_le_bytes([file[8], file[9], file[10], file[11]]) as usize,
                };
                let data = &file[start..start + 4 * m * n];
                for (x, c) in v.iter().zip(data.chunks_exact(4)) {
                    assert_eq!(x.to_bits(), u32::from_le_bytes(c.try_into().unwrap()));
                }
            }
        }
        Err(e) => one_line(&e),
    }
    true
}
