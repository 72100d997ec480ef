//! What the CronJob controller decides: when a CronJob's schedule is due ([`schedule`]) and,
//! from a CronJob, its jobs and the time, what to create, delete and record ([`plan`]).

pub mod plan;
pub mod schedule;
