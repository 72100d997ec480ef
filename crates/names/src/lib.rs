//! Kubernetes' object-name rules (`k8s.io/apimachinery/pkg/util/validation`), in one place for
//! the whole project: the admission webhooks check Volcano objects with them and the embedded
//! API checks every object name with them, so both accept and refuse the same names and word
//! the refusal as kube-apiserver does. Each function returns the problems (empty when valid);
//! the `is_*` forms answer yes or no.
#![forbid(unsafe_code)]

const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";

fn is_alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}

/// Kubernetes `IsQualifiedName`: an optional DNS-subdomain prefix and `/`, then a name of at
/// most 63 characters of alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
/// Returns the problems (empty when valid), worded as Kubernetes words them.
pub fn qualified_name_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let (prefix, name) = match value.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, value),
    };
    if value.matches('/').count() > 1 {
        errs.push(format!(
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ));
        return errs;
    }
    if let Some(p) = prefix {
        if p.is_empty() {
            errs.push("prefix part must be non-empty".into());
        } else {
            errs.extend(
                dns1123_subdomain_errors(p)
                    .into_iter()
                    .map(|e| format!("prefix part {e}")),
            );
        }
    }
    if name.is_empty() {
        errs.push("name part must be non-empty".into());
    } else {
        if name.len() > 63 {
            errs.push("name part must be no more than 63 characters".into());
        }
        let b = name.as_bytes();
        let ok_chars = b
            .iter()
            .all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.');
        if !ok_chars || !is_alnum(b[0]) || !is_alnum(b[b.len() - 1]) {
            errs.push(format!(
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{QUALIFIED_NAME_FMT}')"
            ));
        }
    }
    errs
}

/// Kubernetes `IsDNS1123Label` problems (empty when valid).
pub fn dns1123_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-';
    if !ok {
        errs.push(format!(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '{DNS1123_LABEL_FMT}')"
        ));
    }
    errs
}

/// Kubernetes `IsDNS1035Label` problems (empty when valid): Service names, which must start
/// with a letter.
pub fn dns1035_label_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    let b = value.as_bytes();
    let ok = !b.is_empty()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1] != b'-';
    if !ok {
        errs.push("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')".into());
    }
    errs
}

/// Kubernetes `IsDNS1123Subdomain` problems (empty when valid).
pub fn dns1123_subdomain_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 253 {
        errs.push("must be no more than 253 characters".into());
    }
    let ok = !value.is_empty()
        && value.split('.').all(|part| {
            let b = part.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        });
    if !ok {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".into());
    }
    errs
}

/// Kubernetes `IsValidLabelValue` problems (empty when valid): empty, or at most 63
/// alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric.
pub fn label_value_errors(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > 63 {
        errs.push("must be no more than 63 characters".into());
    }
    let b = value.as_bytes();
    let ok = b.is_empty()
        || (b
            .iter()
            .all(|&c| is_alnum(c) || c == b'-' || c == b'_' || c == b'.')
            && is_alnum(b[0])
            && is_alnum(b[b.len() - 1]));
    if !ok {
        errs.push(format!(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '({QUALIFIED_NAME_FMT})?')"
        ));
    }
    errs
}

/// Whether `value` is a DNS-1123 label (namespace names, most label-like names).
pub fn is_dns1123_label(value: &str) -> bool {
    dns1123_label_errors(value).is_empty()
}

/// Whether `value` is a DNS-1123 subdomain (most object names).
pub fn is_dns1123_subdomain(value: &str) -> bool {
    dns1123_subdomain_errors(value).is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names() {
        for ok in ["a", "my-job-task-0", "A_b.c", "example.com/name"] {
            assert!(qualified_name_errors(ok).is_empty(), "{ok}");
        }
        for bad in ["", "-a", "a-", "a b", &"x".repeat(64), "/a", "a/b/c"] {
            assert!(!qualified_name_errors(bad).is_empty(), "{bad:?}");
        }
        assert!(qualified_name_errors(&"x".repeat(64))[0].contains("63"));
    }

    #[test]
    fn dns_labels_and_subdomains() {
        assert!(dns1123_label_errors("task-1").is_empty());
        assert!(!dns1123_label_errors("Task").is_empty());
        assert!(!dns1123_label_errors("a.b").is_empty());
        assert!(dns1123_subdomain_errors("a.b-c").is_empty());
        assert!(!dns1123_subdomain_errors("a..b").is_empty());
        assert!(!dns1123_subdomain_errors("A").is_empty());
    }

    #[test]
    fn label_values() {
        for ok in ["", "a", "my_value", "1.2-3"] {
            assert!(label_value_errors(ok).is_empty(), "{ok:?}");
        }
        for bad in ["-a", "a-", "a b", "a/b"] {
            assert!(!label_value_errors(bad).is_empty(), "{bad:?}");
        }
        assert!(label_value_errors(&"x".repeat(64))[0].contains("63"));
    }

    #[test]
    fn subdomains_refuse_empty_parts_and_edges() {
        for bad in ["a..b", ".a", "a.", "-a", "a-", "a_b", ""] {
            assert!(!is_dns1123_subdomain(bad), "{bad:?}");
        }
        assert!(is_dns1123_subdomain(&"a".repeat(253)));
        assert!(!is_dns1123_subdomain(&"a".repeat(254)));
        assert!(is_dns1123_label("a-1"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }
}
