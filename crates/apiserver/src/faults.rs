//! Fault injection for reliability tests (`--faults`): a fraction of writes answered 500, a
//! fraction of updates answered 409, and watch streams cut after a fixed time. Faults apply to
//! every client's writes but never to reads, discovery or the stand-ins' own writes.

use std::str::FromStr;
use std::sync::Mutex;
use std::time::Duration;

/// A small deterministic PRNG (SplitMix64): enough for fault draws, uids and generated names,
/// and reproducible from a seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator seeded from the clock and the process id.
    pub fn from_entropy() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Self(nanos ^ (u64::from(std::process::id()) << 32))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float in [0, 1).
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The parsed `--faults` value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultSpec {
    /// Fraction of create/update/patch/delete answered 500 InternalError.
    pub write_error: f64,
    /// Fraction of PUTs and PATCHes answered 409 Conflict.
    pub conflict: f64,
    /// Every watch stream is ended cleanly after this long.
    pub watch_cut: Option<Duration>,
    /// Fixed random sequence.
    pub seed: Option<u64>,
}

/// A `--faults` value that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FaultSpecError {
    /// An item is not `key=value`.
    #[error("fault spec item {0:?} is not key=value")]
    NotKeyValue(String),
    /// An unknown key.
    #[error("unknown fault {0:?} (known: write-error, conflict, watch-cut, seed)")]
    UnknownKey(String),
    /// A value out of range or not a number.
    #[error("fault {key}: invalid value {value:?} ({why})")]
    BadValue {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is expected.
        why: &'static str,
    },
}

impl FaultSpec {
    /// Parses `write-error=0.1,conflict=0.05,watch-cut=5,seed=7` (all optional; empty = none).
    pub fn parse(s: &str) -> Result<Self, FaultSpecError> {
        let mut spec = Self::default();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item
                .split_once('=')
                .ok_or_else(|| FaultSpecError::NotKeyValue(item.to_string()))?;
            let (k, v) = (k.trim(), v.trim());
            let bad = |why| FaultSpecError::BadValue {
                key: k.into(),
                value: v.into(),
                why,
            };
            match k {
                "write-error" | "conflict" => {
                    let f: f64 = v.parse().map_err(|_| bad("a fraction 0..1"))?;
                    if !(0.0..=1.0).contains(&f) {
                        return Err(bad("a fraction 0..1"));
                    }
                    if k == "conflict" {
                        spec.conflict = f;
                    } else {
                        spec.write_error = f;
                    }
                }
                "watch-cut" => {
                    let secs: f64 = v.parse().map_err(|_| bad("seconds > 0"))?;
                    if !(secs > 0.0 && secs.is_finite()) {
                        return Err(bad("seconds > 0, at most 18446744073709551615"));
                    }
                    // `from_secs_f64` panics past u64::MAX seconds; `1e20` must be an error.
                    spec.watch_cut = Some(
                        Duration::try_from_secs_f64(secs)
                            .map_err(|_| bad("seconds > 0, at most 18446744073709551615"))?,
                    );
                }
                "seed" => spec.seed = Some(v.parse().map_err(|_| bad("an unsigned integer"))?),
                other => return Err(FaultSpecError::UnknownKey(other.to_string())),
            }
        }
        Ok(spec)
    }

    /// Whether no fault is configured.
    pub fn is_none(&self) -> bool {
        self.write_error == 0.0 && self.conflict == 0.0 && self.watch_cut.is_none()
    }

    /// One line for the log.
    pub fn describe(&self) -> String {
        if self.is_none() {
            return "faults: none".to_string();
        }
        format!(
            "faults in force: write-error={} conflict={} watch-cut={} seed={}",
            self.write_error,
            self.conflict,
            self.watch_cut
                .map(|d| format!("{}s", d.as_secs_f64()))
                .unwrap_or_else(|| "off".into()),
            self.seed
                .map(|s| s.to_string())
                .unwrap_or_else(|| "random".into()),
        )
    }
}

impl FromStr for FaultSpec {
    type Err = FaultSpecError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// What a write should suffer, drawn per request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Answer 500, store nothing.
    WriteError,
    /// Answer 409, store nothing.
    Conflict,
}

/// Live fault state: the spec plus its random sequence.
#[derive(Debug)]
pub struct Faults {
    spec: FaultSpec,
    rng: Mutex<Rng>,
}

impl Faults {
    /// Fault state for a spec.
    pub fn new(spec: FaultSpec) -> Self {
        let rng = spec.seed.map(Rng::new).unwrap_or_else(Rng::from_entropy);
        Self {
            spec,
            rng: Mutex::new(rng),
        }
    }

    /// The spec.
    pub fn spec(&self) -> &FaultSpec {
        &self.spec
    }

    /// Draws the fault for one write; `is_update` for PUT/PATCH (which may also conflict).
    pub fn draw(&self, is_update: bool) -> Option<Fault> {
        if self.spec.write_error == 0.0 && (self.spec.conflict == 0.0 || !is_update) {
            return None;
        }
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        if self.spec.write_error > 0.0 && rng.next_f64() < self.spec.write_error {
            return Some(Fault::WriteError);
        }
        if is_update && self.spec.conflict > 0.0 && rng.next_f64() < self.spec.conflict {
            return Some(Fault::Conflict);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_contract_example() {
        let s = FaultSpec::parse("write-error=0.1,conflict=0.05,watch-cut=5,seed=7").unwrap();
        assert_eq!(s.write_error, 0.1);
        assert_eq!(s.conflict, 0.05);
        assert_eq!(s.watch_cut, Some(Duration::from_secs(5)));
        assert_eq!(s.seed, Some(7));
        assert!(s.describe().contains("faults"));
        assert!(FaultSpec::parse("").unwrap().is_none());
        assert!(FaultSpec::parse("").unwrap().describe().contains("faults"));
    }

    #[test]
    fn rejects_bad_specs() {
        assert!(matches!(
            FaultSpec::parse("write-error=2"),
            Err(FaultSpecError::BadValue { .. })
        ));
        assert!(matches!(
            FaultSpec::parse("nope=1"),
            Err(FaultSpecError::UnknownKey(_))
        ));
        assert!(matches!(
            FaultSpec::parse("conflict"),
            Err(FaultSpecError::NotKeyValue(_))
        ));
        assert!(FaultSpec::parse("watch-cut=0").is_err());
        assert!(FaultSpec::parse("seed=-1").is_err());
        // Too many seconds for a Duration: an error, not a panic.
        let e = FaultSpec::parse("watch-cut=1e20").unwrap_err().to_string();
        assert!(e.contains("watch-cut") && e.contains("1e20"), "{e}");
    }

    #[test]
    fn draws_are_reproducible_and_near_the_fraction() {
        let f = |seed| {
            let faults =
                Faults::new(FaultSpec::parse(&format!("write-error=0.2,seed={seed}")).unwrap());
            (0..5000).map(|_| faults.draw(false)).collect::<Vec<_>>()
        };
        let a = f(7);
        assert_eq!(a, f(7));
        let errors = a.iter().filter(|d| **d == Some(Fault::WriteError)).count();
        assert!((800..1200).contains(&errors), "{errors}");
        let conflicts_only = Faults::new(FaultSpec::parse("conflict=1,seed=1").unwrap());
        assert_eq!(conflicts_only.draw(false), None, "creates never conflict");
        assert_eq!(conflicts_only.draw(true), Some(Fault::Conflict));
    }
}
