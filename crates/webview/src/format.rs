//! Numbers as a person reads them: ages like kubectl's, cpu in cores, memory in binary units.

/// An age as kubectl prints it: `45s`, `12m`, `3h`, `2d`, from whole seconds (negative, from a
/// clock running behind the object's, is `0s`).
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

/// Millicores as cores: `0`, `0.5`, `2`, `12.25` (at most two decimals, no trailing zeros).
pub fn quantity_cpu(milli: f64) -> String {
    trim(milli / 1000.0)
}

/// Bytes in the largest binary unit that keeps a whole part: `512Mi`, `1.5Gi`, `0`.
pub fn quantity_memory(bytes: f64) -> String {
    const UNITS: [(&str, f64); 4] = [
        ("Ti", 1024.0 * 1024.0 * 1024.0 * 1024.0),
        ("Gi", 1024.0 * 1024.0 * 1024.0),
        ("Mi", 1024.0 * 1024.0),
        ("Ki", 1024.0),
    ];
    if bytes <= 0.0 || !bytes.is_finite() {
        return "0".into();
    }
    for (unit, size) in UNITS {
        if bytes >= size {
            return format!("{}{unit}", trim(bytes / size));
        }
    }
    trim(bytes)
}

fn trim(v: f64) -> String {
    if !v.is_finite() || v.abs() < 0.005 {
        return "0".into();
    }
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(age(-3), "0s");
        assert_eq!(age(59), "59s");
        assert_eq!(age(60), "1m");
        assert_eq!(age(3599), "59m");
        assert_eq!(age(7200), "2h");
        assert_eq!(age(3 * 86400 + 5), "3d");
    }

    #[test]
    fn resources_read_in_cores_and_binary_units() {
        assert_eq!(quantity_cpu(0.0), "0");
        assert_eq!(quantity_cpu(500.0), "0.5");
        assert_eq!(quantity_cpu(12_250.0), "12.25");
        assert_eq!(quantity_cpu(4000.0), "4");
        assert_eq!(quantity_memory(0.0), "0");
        assert_eq!(quantity_memory(512.0 * 1024.0 * 1024.0), "512Mi");
        assert_eq!(quantity_memory(1.5 * 1024.0 * 1024.0 * 1024.0), "1.5Gi");
        assert_eq!(quantity_memory(100.0), "100");
    }
}
