//! Kubernetes resource quantities (`500m`, `2Gi`, `1e3`) read as numbers, for the comparisons
//! the rules make (requests ≤ limits, deserved ≤ capability, sums of guarantees). `f64` is
//! exact enough for comparing what people write in manifests.

/// The value of a quantity string in base units (cores, bytes, items), or `None` if it is not
/// a valid Kubernetes quantity.
pub fn parse(s: &str) -> Option<f64> {
    let s = s.trim();
    let (sign, rest) = match s.as_bytes().first()? {
        b'+' => (1.0, &s[1..]),
        b'-' => (-1.0, &s[1..]),
        _ => (1.0, s),
    };
    let num_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (num, suffix) = rest.split_at(num_end);
    if num.is_empty() || num == "." || num.matches('.').count() > 1 {
        return None;
    }
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp => {
            let digits = exp.strip_prefix(['e', 'E'])?;
            let digits_only = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if digits_only.is_empty() || !digits_only.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let e: i32 = digits.parse().ok()?;
            10f64.powi(e)
        }
    };
    let v = sign * n * mult;
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn reads_the_usual_forms() {
        assert_eq!(parse("1"), Some(1.0));
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("1.5"), Some(1.5));
        assert_eq!(parse("2Gi"), Some(2.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(parse("1k"), Some(1000.0));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("-1"), Some(-1.0));
        assert_eq!(parse(".5"), Some(0.5));
    }

    #[test]
    fn refuses_garbage() {
        for s in ["", "abc", "1x", "1.2.3", "Gi", "1e", "1e+", "--1", "."] {
            assert_eq!(parse(s), None, "{s}");
        }
    }
}
