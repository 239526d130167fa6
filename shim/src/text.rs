//! Numbers in and out of text without allocating: the environment, the
//! policy file, `/proc` files, and the paths and messages the shim builds.

/// The leading decimal number of `bytes` (at most 19 digits), and what
/// follows it.
pub fn leading_decimal(bytes: &[u8]) -> Option<(u64, &[u8])> {
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 19 {
        return None;
    }
    let v = bytes[..digits]
        .iter()
        .fold(0u64, |v, &b| v * 10 + u64::from(b - b'0'));
    Some((v, &bytes[digits..]))
}

/// `bytes` as a decimal number, if it is nothing but 1 to `max_digits`
/// digits (at most 19).
pub fn decimal(bytes: &[u8], max_digits: usize) -> Option<u64> {
    match leading_decimal(bytes) {
        Some((v, [])) if bytes.len() <= max_digits => Some(v),
        _ => None,
    }
}

/// `digits` as a hexadecimal number (no `0x`), 1 to 16 digits.
pub fn hex(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    digits.iter().try_fold(0u64, |v, &d| {
        Some(v << 4 | u64::from((d as char).to_digit(16)?))
    })
}

/// `v` in decimal, written at the end of `digits`.
pub fn format_u32(mut v: u32, digits: &mut [u8; 10]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return &digits[at..];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_read_and_written() {
        assert_eq!(leading_decimal(b"123 45"), Some((123, &b" 45"[..])));
        assert_eq!(leading_decimal(b"x"), None);
        assert_eq!(decimal(b"250", 12), Some(250));
        assert_eq!(decimal(b"2.5", 12), None);
        assert_eq!(decimal(b"1234", 3), None);
        assert_eq!(decimal(b"", 3), None);
        assert_eq!(hex(b"7fFf"), Some(0x7fff));
        assert_eq!(hex(b"x1"), None);
        assert_eq!(format_u32(0, &mut [0; 10]), b"0");
        assert_eq!(format_u32(4294967295, &mut [0; 10]), b"4294967295");
    }
}
