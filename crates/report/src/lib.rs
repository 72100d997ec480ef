//! Errors as a person reads them: one line, the outermost cause first, each cause once.
//!
//! Rust errors form a chain (`Error::source`), and the libraries in it disagree on whether a
//! layer's `Display` repeats its cause: kube's `ApiError: {0} ({0:?})` prints the `Status`
//! twice, once as a `Debug` dump, and then hands it out again as its source; ours and most
//! others include the cause; hyper and reqwest do not. Printing every layer (anyhow's `{:#}`)
//! therefore says the same thing two or three times, and printing only the top one loses the
//! causes of the libraries that keep them apart. [`Report`] walks the chain and keeps, of
//! each layer, only what its cause does not already say:
//!
//! ```text
//!   ensuring queue default: ApiError: m: InternalError (Status { .. })   ← layer 0
//!   ApiError: m: InternalError (Status { .. })                           ← layer 1 (kube)
//!   m: InternalError                                                     ← layer 2 (Status)
//!   ────────────────────────────────────────────────────────────────────
//!   ensuring queue default: m (500 InternalError)
//! ```
//!
//! Every error that ends the process and every error a loop logs goes through it
//! (`tracing::warn!(error = %report(&e), ..)`).

use std::error::Error;
use std::fmt;

/// Displays an error and its causes as one line (see the module docs).
pub struct Report<'a>(pub &'a (dyn Error + 'static));

/// Shorthand for [`Report`] from any concrete error.
pub fn report<E: Error + 'static>(e: &E) -> Report<'_> {
    Report(e)
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&render(self.0))
    }
}

impl fmt::Debug for Report<'_> {
    // `Debug` reads the same: a `Result` from `main` or an `{:?}` in a log stays one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// A kube API error as a sentence: the server's message and, in brackets, the HTTP code and
/// reason (`... not found (404 NotFound)`), never the `Status` struct.
fn api_status(s: &kube::core::Status) -> String {
    let tail = format!("{} {}", s.code, s.reason);
    let tail = tail.trim();
    match (s.message.trim(), tail.is_empty() || tail == "0") {
        ("", _) => tail.to_string(),
        (m, true) => m.to_string(),
        (m, false) => format!("{m} ({tail})"),
    }
}

/// The part of `text` its cause (`inner`) does not say: `outer: inner` becomes `outer`.
fn own_part(text: &str, inner: &str) -> String {
    if inner.is_empty() {
        return text.to_string();
    }
    let own = match text.strip_suffix(inner) {
        Some(own) => own,
        // The cause in the middle (`... {source} (extra)`) is rare; cut it out all the same.
        None => match text.find(inner) {
            Some(at) => return format!("{}{}", &text[..at], &text[at + inner.len()..]),
            None => text,
        },
    };
    own.trim_end_matches([' ', ':', '(', ';', ',', '-'])
        .to_string()
}

/// Labels like kube's `HyperError` or `ServiceError` that remain once the cause is cut away
/// name a type, not a cause; they are dropped.
fn is_type_label(s: &str) -> bool {
    !s.contains(' ') && (s.ends_with("Error") || s.ends_with("error"))
}

fn render(top: &(dyn Error + 'static)) -> String {
    // The chain, bounded: a source cycle would otherwise never end.
    let mut layers: Vec<&(dyn Error + 'static)> = vec![top];
    let mut cur = top.source();
    while let Some(next) = cur {
        if layers.len() >= 32 {
            break;
        }
        layers.push(next);
        cur = next.source();
    }
    let texts: Vec<String> = layers.iter().map(|e| e.to_string()).collect();
    let mut parts: Vec<String> = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        // Errors that box their kube cause (it is large) hold it as `Box<kube::Error>`, a type
        // of its own to `downcast_ref`.
        let kube_error = layer
            .downcast_ref::<kube::Error>()
            .or_else(|| layer.downcast_ref::<Box<kube::Error>>().map(|b| &**b));
        if let Some(kube::Error::Api(status)) = kube_error {
            // The Status below it says the same again; the chain ends here.
            parts.push(api_status(status));
            break;
        }
        let status = layer.downcast_ref::<kube::core::Status>().or_else(|| {
            layer
                .downcast_ref::<Box<kube::core::Status>>()
                .map(|b| &**b)
        });
        if let Some(status) = status {
            parts.push(api_status(status));
            break;
        }
        let inner = texts.get(i + 1).map(String::as_str).unwrap_or("");
        let own = own_part(&texts[i], inner);
        let own = own.trim();
        if own.is_empty() || is_type_label(own) {
            continue;
        }
        // A layer that only repeats what an outer layer already said adds nothing.
        if parts.iter().any(|p| p.contains(own)) {
            continue;
        }
        parts.push(own.to_string());
    }
    let line = parts.join(": ");
    // One line, whatever a library put in its message.
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("ensuring queue {queue}: {source}")]
    struct Wrapped {
        queue: &'static str,
        #[source]
        source: kube::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("outer")]
    struct Outer(#[source] Wrapped);

    #[derive(Debug, thiserror::Error)]
    #[error("reading {path}")]
    struct Bare {
        path: &'static str,
        #[source]
        source: std::io::Error,
    }

    fn status(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(
            kube::core::Status {
                code,
                reason: reason.into(),
                message: message.into(),
                ..Default::default()
            }
            .boxed(),
        )
    }

    fn once(line: &str, piece: &str) {
        assert_eq!(line.matches(piece).count(), 1, "{piece:?} in {line:?}");
    }

    #[test]
    fn a_kube_api_error_is_its_message_code_and_reason_once() {
        let e = Wrapped {
            queue: "default",
            source: status(
                500,
                "InternalError",
                "Internal error occurred: webhook failed",
            ),
        };
        let line = report(&e).to_string();
        assert_eq!(
            line,
            "ensuring queue default: Internal error occurred: webhook failed (500 InternalError)"
        );
        assert!(
            !line.contains("Status {") && !line.contains("ApiError"),
            "{line}"
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("creating Lease ns/tephra: {source}")]
    struct Boxed {
        #[source]
        source: Box<kube::Error>,
    }

    #[test]
    fn a_boxed_kube_error_reads_the_same() {
        let e = Boxed {
            source: Box::new(status(404, "NotFound", "namespaces \"ns\" not found")),
        };
        assert_eq!(
            report(&e).to_string(),
            "creating Lease ns/tephra: namespaces \"ns\" not found (404 NotFound)"
        );
    }

    #[test]
    fn outer_layers_without_their_cause_still_come_first() {
        let e = Outer(Wrapped {
            queue: "root",
            source: status(404, "NotFound", "queues \"root\" not found"),
        });
        assert_eq!(
            report(&e).to_string(),
            "outer: ensuring queue root: queues \"root\" not found (404 NotFound)"
        );
    }

    #[test]
    fn causes_kept_apart_are_joined_and_repeated_ones_dropped() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let bare = Bare {
            path: "/x/tls.crt",
            source: io(),
        };
        assert_eq!(
            report(&bare).to_string(),
            "reading /x/tls.crt: No such file"
        );

        #[derive(Debug, thiserror::Error)]
        #[error("cannot read TLS file {path}: {source}")]
        struct Repeats {
            path: &'static str,
            source: std::io::Error,
        }
        let line = report(&Repeats {
            path: "/x/tls.crt",
            source: io(),
        })
        .to_string();
        assert_eq!(line, "cannot read TLS file /x/tls.crt: No such file");
        once(&line, "No such file");
    }

    #[test]
    fn a_type_label_left_without_its_cause_is_dropped() {
        #[derive(Debug, thiserror::Error)]
        #[error("HyperError: {0}")]
        struct Labelled(#[source] Bare);
        let line = report(&Labelled(Bare {
            path: "p",
            source: std::io::Error::other("refused"),
        }))
        .to_string();
        assert_eq!(line, "reading p: refused");
    }

    #[test]
    fn the_report_is_one_line() {
        let e = std::io::Error::other("two\nlines");
        assert_eq!(report(&e).to_string(), "two lines");
    }
}
