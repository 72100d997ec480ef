//! Pieces shared by the API groups: the string-enum macro, Go durations, resource lists.

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::TypesError;

/// A DNS-1123 subdomain, as Volcano's CRD checks `queue` and `priorityClassName`.
pub(crate) const DNS1123_SUBDOMAIN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// A Kubernetes `ResourceList`: resource name (`cpu`, `memory`, `nvidia.com/gpu`) → quantity.
pub type ResourceList = BTreeMap<String, Quantity>;

/// Defines a string-valued enumeration that keeps values it does not know.
///
/// Volcano declares these as Go `string` types; a manifest written for a newer Volcano may carry
/// a value this build has never heard of, and rejecting it would make the whole object
/// unreadable. Unknown values land in `Other(String)` and serialize back unchanged.
///
/// `schema_enum = true` puts the known values in the CRD schema as an `enum` (where Volcano's
/// CRD does the same); `false` leaves the schema a plain string.
macro_rules! string_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident (schema_enum = $schema_enum:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $value:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
            /// A value this version of tephra does not know; kept verbatim so it round-trips.
            Other(String),
        }

        impl $name {
            /// Every value this build knows, in Volcano's order.
            pub const KNOWN: &'static [&'static str] = &[$($value),+];

            /// The wire form of the value.
            pub fn as_str(&self) -> &str {
                match self {
                    $( Self::$variant => $value, )+
                    Self::Other(s) => s.as_str(),
                }
            }

            /// `false` for an `Other` value.
            pub fn is_known(&self) -> bool {
                !matches!(self, Self::Other(_))
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                match s {
                    $( $value => Self::$variant, )+
                    other => Self::Other(other.to_string()),
                }
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                match s.as_str() {
                    $( $value => Self::$variant, )+
                    _ => Self::Other(s),
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::convert::Infallible;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Ok(Self::from(s))
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                self.as_str()
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
                ser.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
                let s = <String as serde::Deserialize>::deserialize(de)?;
                Ok(Self::from(s))
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn inline_schema() -> bool {
                true
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                if $schema_enum {
                    schemars::json_schema!({ "type": "string", "enum": [$($value),+] })
                } else {
                    schemars::json_schema!({ "type": "string" })
                }
            }
        }
    };
}
pub(crate) use string_enum;

/// A Go `metav1.Duration` as it appears on the wire: `"90s"`, `"1h30m"`, `"500ms"`.
///
/// The text is kept as written so a manifest round-trips byte for byte; [`Duration::to_std`]
/// parses it the way Go's `time.ParseDuration` does.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Duration(pub String);

impl JsonSchema for Duration {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Duration".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "string" })
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<std::time::Duration> for Duration {
    fn from(d: std::time::Duration) -> Self {
        Duration::from_std(d)
    }
}

impl Duration {
    /// Formats a duration the way Go's `time.Duration.String()` does (`1h0m0s`, `1m30s`,
    /// `1.5s`, `500ms`, `0s`), which is what Volcano writes into `status.runningDuration`.
    pub fn from_std(d: std::time::Duration) -> Self {
        let nanos = d.as_nanos();
        if nanos == 0 {
            return Duration("0s".into());
        }
        if nanos < 1_000 {
            return Duration(format!("{nanos}ns"));
        }
        if nanos < 1_000_000 {
            return Duration(format!("{}µs", frac(nanos, 1_000)));
        }
        if nanos < 1_000_000_000 {
            return Duration(format!("{}ms", frac(nanos, 1_000_000)));
        }
        let total_secs = nanos / 1_000_000_000;
        let sub = nanos % 1_000_000_000;
        let hours = total_secs / 3600;
        let minutes = (total_secs % 3600) / 60;
        let secs = frac((total_secs % 60) * 1_000_000_000 + sub, 1_000_000_000);
        let s = if hours > 0 {
            format!("{hours}h{minutes}m{secs}s")
        } else if minutes > 0 {
            format!("{minutes}m{secs}s")
        } else {
            format!("{secs}s")
        };
        Duration(s)
    }

    /// Parses the text as Go's `time.ParseDuration` does: an optional sign, then one or more
    /// decimal numbers each with a unit (`ns`, `us`/`µs`, `ms`, `s`, `m`, `h`); `"0"` alone is
    /// zero. Negative durations are rejected (none of Volcano's fields means anything by them).
    pub fn to_std(&self) -> Result<std::time::Duration, TypesError> {
        parse_go_duration(&self.0).ok_or_else(|| TypesError::InvalidDuration(self.0.clone()))
    }
}

/// `n / unit` with the fractional part, trailing zeros trimmed (`1500, 1000` → `1.5`).
fn frac(n: u128, unit: u128) -> String {
    let whole = n / unit;
    let rest = n % unit;
    if rest == 0 {
        return whole.to_string();
    }
    let width = unit.to_string().len() - 1;
    let digits = format!("{rest:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

fn parse_go_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.strip_prefix('+').unwrap_or(s);
    if s.starts_with('-') {
        return None;
    }
    if s == "0" {
        return Some(std::time::Duration::ZERO);
    }
    if s.is_empty() {
        return None;
    }
    let mut total: f64 = 0.0;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (num, tail) = rest.split_at(num_len);
        if num.is_empty() || num == "." {
            return None;
        }
        let value: f64 = num.parse().ok()?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let scale = match unit {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += value * scale;
        rest = tail;
    }
    std::time::Duration::try_from_secs_f64(total).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration as Std;

    #[test]
    fn parses_go_durations() {
        let cases = [
            ("90s", Std::from_secs(90)),
            ("1h30m", Std::from_secs(5400)),
            ("1m30.5s", Std::from_millis(90_500)),
            ("500ms", Std::from_millis(500)),
            ("0", Std::ZERO),
            ("2h0m0s", Std::from_secs(7200)),
        ];
        for (text, want) in cases {
            assert_eq!(Duration(text.into()).to_std().unwrap(), want, "{text}");
        }
        for bad in ["", "10", "5x", "-1s", "s", "1.2.3s"] {
            assert!(
                Duration(bad.into()).to_std().is_err(),
                "{bad:?} should not parse"
            );
        }
    }

    #[test]
    fn formats_like_go() {
        let cases = [
            (Std::ZERO, "0s"),
            (Std::from_secs(3600), "1h0m0s"),
            (Std::from_secs(90), "1m30s"),
            (Std::from_millis(1500), "1.5s"),
            (Std::from_millis(500), "500ms"),
            (Std::from_micros(1500), "1.5ms"),
            (Std::from_nanos(42), "42ns"),
            (Std::from_secs(3723), "1h2m3s"),
        ];
        for (d, want) in cases {
            assert_eq!(Duration::from_std(d).0, want);
            assert_eq!(
                Duration::from_std(d).to_std().unwrap(),
                d,
                "{want} parses back"
            );
        }
    }
}
