//! Cron schedules read as Kubernetes reads a CronJob's (`cron.ParseStandard` of robfig/cron
//! v3): five fields (minute, hour, day of month, month, day of week), the macros `@yearly`,
//! `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly`, and
//! `@every <duration>`; an optional `CRON_TZ=<zone>` or `TZ=<zone>` prefix.
//!
//! Fields take `*` or `?`, a number or name (`jan`-`dec`, `sun`-`sat`, any case), a range
//! `a-b`, a step `/n` after any of these, and comma-separated lists of them. When both the
//! day of month and the day of week are restricted (neither starts with `*` or `?`), a day
//! matches if either matches; otherwise both must, as in robfig/cron.
//!
//! Times are found on the wall clock of the schedule's zone: the next time is the first
//! whole minute strictly after the given instant whose local fields match. A local time that
//! a DST gap skips is taken as the instant after the gap, and a repeated one at its first
//! occurrence (jiff's "compatible" rule). As robfig/cron, nothing more than five years away
//! is looked for.

use std::fmt;

use jiff::civil::{Date, DateTime};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// A parsed schedule, with the zone its fields are read in.
#[derive(Clone, Debug)]
pub struct Schedule {
    kind: Kind,
    zone: TimeZone,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Kind {
    /// Bit `i` of each set means value `i` matches.
    Fields {
        minutes: u64,
        hours: u32,
        days_of_month: u32,
        months: u16,
        days_of_week: u8,
        /// Either day field is `*`/`?`: both day fields must match (else either may).
        day_and: bool,
    },
    /// `@every`: a whole number of seconds, at least one.
    Every(i64),
}

/// Why a schedule or time zone was refused; the text says what to fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleError(pub String);

impl fmt::Display for ScheduleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ScheduleError {}

fn err(msg: impl Into<String>) -> ScheduleError {
    ScheduleError(msg.into())
}

/// Looks up an IANA zone name (`Europe/Berlin`, `UTC`) in the system's time zone database.
pub fn zone(name: &str) -> Result<TimeZone, ScheduleError> {
    if name.is_empty() {
        return Err(err("time zone name is empty"));
    }
    if name == "UTC" || name == "Etc/UTC" {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|e| err(format!("unknown time zone {name:?}: {e}")))
}

/// True if the schedule text names its own zone (`TZ=` or `CRON_TZ=`), which Kubernetes
/// refuses together with `spec.timeZone`.
pub fn names_zone(spec: &str) -> bool {
    spec.contains("TZ")
}

/// Parses `spec` with its zone `time_zone` (`spec.timeZone`; UTC when `None`). A `TZ=`
/// prefix in `spec` is refused when `time_zone` is set.
pub fn parse(spec: &str, time_zone: Option<&str>) -> Result<Schedule, ScheduleError> {
    let spec = spec.trim();
    if spec.is_empty() {
        return Err(err("empty spec string"));
    }
    let (zone_name, rest) = match spec
        .strip_prefix("CRON_TZ=")
        .or_else(|| spec.strip_prefix("TZ="))
    {
        Some(tail) => {
            let (name, rest) = tail
                .split_once(char::is_whitespace)
                .ok_or_else(|| err(format!("missing schedule after the time zone in {spec:?}")))?;
            (Some(name), rest.trim_start())
        }
        None => (None, spec),
    };
    let zone = match (zone_name, time_zone) {
        (Some(_), Some(_)) => {
            return Err(err(
                "the schedule may not name a time zone (TZ= or CRON_TZ=) when timeZone is set",
            ));
        }
        (Some(name), None) | (None, Some(name)) => self::zone(name)?,
        (None, None) => TimeZone::UTC,
    };
    let kind = if let Some(macro_) = rest.strip_prefix('@') {
        parse_macro(macro_)?
    } else {
        parse_fields(rest)?
    };
    Ok(Schedule { kind, zone })
}

fn parse_macro(m: &str) -> Result<Kind, ScheduleError> {
    let fields = match m {
        "yearly" | "annually" => "0 0 1 1 *",
        "monthly" => "0 0 1 * *",
        "weekly" => "0 0 * * 0",
        "daily" | "midnight" => "0 0 * * *",
        "hourly" => "0 * * * *",
        _ => {
            let Some(d) = m.strip_prefix("every ") else {
                return Err(err(format!("unrecognized descriptor: @{m}")));
            };
            let d = d.trim();
            let dur = tephra_api::Duration(d.to_string())
                .to_std()
                .map_err(|_| err(format!("failed to parse duration @every {d}")))?;
            // Below a second counts as a second; the rest is cut to whole seconds.
            let secs = i64::try_from(dur.as_secs()).unwrap_or(i64::MAX).max(1);
            return Ok(Kind::Every(secs));
        }
    };
    parse_fields(fields)
}

fn parse_fields(spec: &str) -> Result<Kind, ScheduleError> {
    let parts: Vec<&str> = spec.split_whitespace().collect();
    if parts.len() != 5 {
        return Err(err(format!(
            "expected exactly 5 fields, found {}: {spec:?}",
            parts.len()
        )));
    }
    const MONTHS: &[&str] = &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ];
    const DAYS: &[&str] = &["sun", "mon", "tue", "wed", "thu", "fri", "sat"];
    let (minutes, _) = field(parts[0], 0, 59, &[], 0)?;
    let (hours, _) = field(parts[1], 0, 23, &[], 0)?;
    let (dom, dom_star) = field(parts[2], 1, 31, &[], 0)?;
    let (months, _) = field(parts[3], 1, 12, MONTHS, 1)?;
    let (dow, dow_star) = field(parts[4], 0, 6, DAYS, 0)?;
    Ok(Kind::Fields {
        minutes,
        hours: hours as u32,
        days_of_month: dom as u32,
        months: months as u16,
        days_of_week: dow as u8,
        day_and: dom_star || dow_star,
    })
}

/// One field: the bits of the values it matches, and whether it starts with `*` or `?`.
fn field(
    text: &str,
    min: u32,
    max: u32,
    names: &[&str],
    first_name: u32,
) -> Result<(u64, bool), ScheduleError> {
    let mut bits = 0u64;
    let star = text.starts_with('*') || text.starts_with('?');
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .map_err(|_| err(format!("failed to parse step {s:?} in {text:?}")))?;
                if step == 0 {
                    return Err(err(format!(
                        "step of range should be a positive number: {part:?}"
                    )));
                }
                (r, Some(step))
            }
            None => (part, None),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            (min, max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, names, first_name)?, value(b, names, first_name)?)
        } else {
            let v = value(range, names, first_name)?;
            // `5/15` means from 5 to the end, every 15.
            (v, if step.is_some() { max } else { v })
        };
        if lo < min || hi > max {
            return Err(err(format!("value out of range ({min}-{max}) in {part:?}")));
        }
        if lo > hi {
            return Err(err(format!(
                "beginning of range ({lo}) beyond end of range ({hi}): {part:?}"
            )));
        }
        let step = step.unwrap_or(1);
        let mut v = lo;
        while v <= hi {
            bits |= 1 << v;
            v += step;
        }
    }
    Ok((bits, star))
}

fn value(text: &str, names: &[&str], first_name: u32) -> Result<u32, ScheduleError> {
    let lower = text.to_ascii_lowercase();
    if let Some(i) = names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + first_name);
    }
    text.parse()
        .map_err(|_| err(format!("failed to parse int from {text:?}")))
}

impl Schedule {
    /// The zone the schedule is read in.
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The first schedule time strictly after `t`, `None` if none within five years.
    pub fn next(&self, t: Timestamp) -> Option<Timestamp> {
        match &self.kind {
            Kind::Every(secs) => Timestamp::from_second(t.as_second().checked_add(*secs)?).ok(),
            Kind::Fields { .. } => self.next_fields(t),
        }
    }

    fn next_fields(&self, t: Timestamp) -> Option<Timestamp> {
        let Kind::Fields {
            minutes,
            hours,
            days_of_month,
            months,
            days_of_week,
            day_and,
        } = &self.kind
        else {
            return None;
        };
        let local = t.to_zoned(self.zone.clone()).datetime();
        let mut date: Date = local.date();
        let end = date.checked_add(5.years()).ok()?;
        while date <= end {
            let month_ok = months & (1 << date.month()) != 0;
            let dom_ok = days_of_month & (1 << date.day()) != 0;
            let dow_ok = days_of_week & (1 << date.weekday().to_sunday_zero_offset()) != 0;
            let day_ok = if *day_and {
                dom_ok && dow_ok
            } else {
                dom_ok || dow_ok
            };
            if month_ok && day_ok {
                for h in 0..24i8 {
                    if hours & (1 << h) == 0 {
                        continue;
                    }
                    for m in 0..60i8 {
                        if minutes & (1 << m) == 0 {
                            continue;
                        }
                        let dt: DateTime = date.at(h, m, 0, 0);
                        let Ok(zoned) = dt.to_zoned(self.zone.clone()) else {
                            continue;
                        };
                        let ts = zoned.timestamp();
                        if ts > t {
                            return Some(ts);
                        }
                    }
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(spec: &str, after: &str) -> String {
        parse(spec, None)
            .unwrap()
            .next(ts(after))
            .unwrap()
            .to_string()
    }

    #[test]
    fn five_fields() {
        assert_eq!(
            next("*/5 * * * *", "2025-01-01T10:02:30Z"),
            "2025-01-01T10:05:00Z"
        );
        assert_eq!(
            next("*/5 * * * *", "2025-01-01T10:05:00Z"),
            "2025-01-01T10:10:00Z"
        );
        assert_eq!(
            next("0 9 * * mon-fri", "2025-01-03T10:00:00Z"),
            "2025-01-06T09:00:00Z"
        );
        assert_eq!(
            next("30 2 1 JAN,jul ?", "2025-02-01T00:00:00Z"),
            "2025-07-01T02:30:00Z"
        );
        assert_eq!(
            next("5/20 * * * *", "2025-01-01T10:46:00Z"),
            "2025-01-01T11:05:00Z"
        );
        assert_eq!(
            next("0 0 29 2 *", "2025-01-01T00:00:00Z"),
            "2028-02-29T00:00:00Z"
        );
    }

    #[test]
    fn restricted_day_fields_match_either() {
        // The 13th or any Friday.
        assert_eq!(
            next("0 0 13 * 5", "2025-06-01T00:00:00Z"),
            "2025-06-06T00:00:00Z"
        );
        // With `*` in day of week only the 13th counts.
        assert_eq!(
            next("0 0 13 * *", "2025-06-01T00:00:00Z"),
            "2025-06-13T00:00:00Z"
        );
    }

    #[test]
    fn macros() {
        assert_eq!(
            next("@hourly", "2025-01-01T10:02:00Z"),
            "2025-01-01T11:00:00Z"
        );
        assert_eq!(
            next("@daily", "2025-01-01T10:02:00Z"),
            "2025-01-02T00:00:00Z"
        );
        assert_eq!(
            next("@midnight", "2025-01-01T10:02:00Z"),
            "2025-01-02T00:00:00Z"
        );
        assert_eq!(
            next("@weekly", "2025-01-01T10:02:00Z"),
            "2025-01-05T00:00:00Z"
        );
        assert_eq!(
            next("@monthly", "2025-01-01T10:02:00Z"),
            "2025-02-01T00:00:00Z"
        );
        assert_eq!(
            next("@yearly", "2025-01-01T10:02:00Z"),
            "2026-01-01T00:00:00Z"
        );
        assert_eq!(
            next("@annually", "2025-01-01T10:02:00Z"),
            "2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn every() {
        assert_eq!(
            next("@every 2s", "2025-01-01T10:00:00Z"),
            "2025-01-01T10:00:02Z"
        );
        assert_eq!(
            next("@every 1h30m", "2025-01-01T10:00:00Z"),
            "2025-01-01T11:30:00Z"
        );
        // Below a second counts as a second; fractions are cut.
        assert_eq!(
            next("@every 100ms", "2025-01-01T10:00:00Z"),
            "2025-01-01T10:00:01Z"
        );
        assert_eq!(
            next("@every 2.5s", "2025-01-01T10:00:00Z"),
            "2025-01-01T10:00:02Z"
        );
    }

    #[test]
    fn time_zones() {
        let s = parse("0 9 * * *", Some("Asia/Tokyo")).expect("Asia/Tokyo");
        assert_eq!(
            s.next(ts("2025-01-01T00:00:00Z")).unwrap().to_string(),
            "2025-01-02T00:00:00Z"
        );
        let s = parse("TZ=America/New_York 0 9 * * *", None).unwrap();
        assert_eq!(
            s.next(ts("2025-07-01T00:00:00Z")).unwrap().to_string(),
            "2025-07-01T13:00:00Z"
        );
        let s = parse("CRON_TZ=Europe/Berlin 30 2 * * *", None).unwrap();
        // 2:30 does not exist on 2025-03-30 in Berlin: the instant after the gap.
        assert_eq!(
            s.next(ts("2025-03-29T12:00:00Z")).unwrap().to_string(),
            "2025-03-30T01:30:00Z"
        );
    }

    #[test]
    fn refusals() {
        for bad in [
            "",
            "* * * *",
            "* * * * * *",
            "60 * * * *",
            "* 24 * * *",
            "* * 0 * *",
            "* * * 13 *",
            "* * * * 7",
            "*/0 * * * *",
            "5-1 * * * *",
            "x * * * *",
            "@often",
            "@every",
            "@every soon",
        ] {
            assert!(parse(bad, None).is_err(), "{bad:?} accepted");
        }
        let e = parse("TZ=UTC * * * * *", Some("UTC")).unwrap_err();
        assert!(e.0.contains("timeZone"), "{e}");
        assert!(parse("* * * * *", Some("Mars/Olympus")).is_err());
        assert!(parse("CRON_TZ=Mars/Olympus * * * * *", None).is_err());
    }

    /// Whether `t` matches the five fields in UTC, checked naively.
    fn matches(spec: &str, t: Timestamp) -> bool {
        let dt = t.to_zoned(TimeZone::UTC).datetime();
        let f: Vec<&str> = spec.split(' ').collect();
        let ok = |field: &str, v: i64| {
            field == "*" || field.split(',').any(|x| x.parse::<i64>() == Ok(v))
        };
        dt.second() == 0
            && ok(f[0], dt.minute().into())
            && ok(f[1], dt.hour().into())
            && ok(f[2], dt.day().into())
            && ok(f[3], dt.month().into())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn next_times_increase_and_match(
            minute in prop_oneof![Just("*".to_string()), (0..60u8).prop_map(|m| m.to_string())],
            hour in prop_oneof![Just("*".to_string()), (0..24u8, 0..24u8).prop_map(|(a, b)| format!("{a},{b}"))],
            day in prop_oneof![Just("*".to_string()), (1..29u8).prop_map(|d| d.to_string())],
            month in prop_oneof![Just("*".to_string()), (1..13u8).prop_map(|m| m.to_string())],
            start in 0i64..2_000_000_000,
        ) {
            let spec = format!("{minute} {hour} {day} {month} *");
            let s = parse(&spec, None).unwrap();
            let mut t = Timestamp::from_second(start).unwrap();
            for _ in 0..5 {
                let n = s.next(t).unwrap();
                prop_assert!(n > t);
                prop_assert!(matches(&spec, n), "{spec} at {n}");
                t = n;
            }
        }
    }
}
