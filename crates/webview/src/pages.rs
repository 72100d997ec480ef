//! The pages as HTML: one askama template per page (in `templates/`, checked when this crate
//! compiles), all extending one layout. askama escapes every value it prints, so a name, a
//! scheduler message or pasted text cannot add markup.

use askama::Template;
use tephra_scheduler::whatif::{JobPrediction, Prediction};

use crate::BASE_PATH;
use crate::model::{GangPage, Overview};

/// A page could not be rendered (a template fault: a defect, not bad input).
#[derive(Debug, thiserror::Error)]
#[error("rendering a web view page: {0}")]
pub struct PageError(String);

impl From<askama::Error> for PageError {
    fn from(e: askama::Error) -> Self {
        Self(e.to_string())
    }
}

#[derive(Template)]
#[template(path = "overview.html")]
struct OverviewHtml<'a> {
    base: &'static str,
    page: &'a Overview,
}

#[derive(Template)]
#[template(path = "gang.html")]
struct GangHtml<'a> {
    base: &'static str,
    page: &'a GangPage,
}

#[derive(Template)]
#[template(path = "not_found.html")]
struct NotFoundHtml<'a> {
    base: &'static str,
    message: &'a str,
}

#[derive(Template)]
#[template(path = "whatif.html")]
struct WhatIfHtml<'a> {
    base: &'static str,
    horizon: String,
    answer: &'a WhatIfView,
}

/// The front page.
pub fn render_overview(page: &Overview) -> Result<String, PageError> {
    Ok(OverviewHtml {
        base: BASE_PATH,
        page,
    }
    .render()?)
}

/// A gang's page.
pub fn render_gang(page: &GangPage) -> Result<String, PageError> {
    Ok(GangHtml {
        base: BASE_PATH,
        page,
    }
    .render()?)
}

/// The page for a path that names nothing (served with 404).
pub fn render_not_found(message: &str) -> Result<String, PageError> {
    Ok(NotFoundHtml {
        base: BASE_PATH,
        message,
    }
    .render()?)
}

/// The what-if page: the form (with what was pasted, so it can be changed and sent again) and,
/// once asked, the prediction or why there is none.
#[derive(Clone, Debug, Default)]
pub struct WhatIfAnswer {
    /// The pasted text, shown again in the form.
    pub input: String,
    /// The namespace given for jobs that name none.
    pub namespace: String,
    /// The prediction, or why it could not be made (a line for a person); `None` before the
    /// form is sent.
    pub result: Option<Result<Prediction, String>>,
}

struct WhatIfView {
    input: String,
    namespace: String,
    asked: bool,
    error: Option<String>,
    rows: Vec<WhatIfRow>,
    notes: Vec<String>,
}

struct WhatIfRow {
    name: String,
    namespace: String,
    queue: String,
    tried: bool,
    admitted: String,
    starts: String,
    finishes: String,
    waits_for: String,
    delays: String,
}

/// Seconds from now as a person reads them: `now`, `45s`, `2m 5s`, `3h 10m`, `never` (not
/// within the horizon).
fn after(seconds: Option<i64>) -> String {
    match seconds {
        None => "never".into(),
        Some(s) if s <= 0 => "now".into(),
        Some(s) if s < 60 => format!("{s}s"),
        Some(s) if s < 3600 => format!("{}m {}s", s / 60, s % 60),
        Some(s) => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

fn row(j: &JobPrediction) -> WhatIfRow {
    WhatIfRow {
        name: j.name.clone(),
        namespace: j.namespace.clone(),
        queue: j.queue.clone(),
        tried: j.tried,
        admitted: after(j.admitted_after_seconds),
        starts: after(j.start_after_seconds),
        finishes: after(j.finish_after_seconds),
        waits_for: j.waits_for.clone(),
        delays: j
            .delays
            .iter()
            .map(|d| match d.by_seconds {
                Some(s) => format!("{}/{} by {}", d.namespace, d.name, after(Some(s))),
                None => format!("{}/{} past the horizon", d.namespace, d.name),
            })
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The what-if page.
pub fn render_whatif(answer: &WhatIfAnswer, horizon_seconds: i64) -> Result<String, PageError> {
    let (asked, error, rows, notes) = match &answer.result {
        None => (false, None, Vec::new(), Vec::new()),
        Some(Err(e)) => (true, Some(e.clone()), Vec::new(), Vec::new()),
        Some(Ok(p)) => (
            true,
            None,
            p.jobs.iter().map(row).collect(),
            p.notes.clone(),
        ),
    };
    let view = WhatIfView {
        input: answer.input.clone(),
        namespace: answer.namespace.clone(),
        asked,
        error,
        rows,
        notes,
    };
    Ok(WhatIfHtml {
        base: BASE_PATH,
        horizon: after(Some(horizon_seconds)),
        answer: &view,
    }
    .render()?)
}
