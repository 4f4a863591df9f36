//! Messages as one clear line (the house rule: bad input gets one line and
//! exit code 2): the CLI's errors, the Python binding's exceptions and the
//! notes of explanations that could not be made.

/// A message as one line: its non-empty lines, trimmed, joined by "; ".
pub fn one_line(msg: &str) -> String {
    msg.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn lines_are_trimmed_and_joined() {
        assert_eq!(one_line("  a \n\n b\n"), "a; b");
        assert_eq!(one_line("one"), "one");
        assert_eq!(one_line(""), "");
    }
}
