//! The reference pages of the book (`docs/reference/`) are rendered here from the code: the
//! command line from clap's definition, the metrics from `/metrics` of a running
//! `tephra serve --embedded`, the admission webhooks from the webhook table and the
//! configurations tephra registers, and the scheduler configuration from the scheduler crate.
//! A test fails, naming the page and showing the lines that differ, when a committed page is
//! not what the code says; `TEPHRA_BLESS=1 cargo test --test it reference_docs::` writes
//! the pages instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::{Duration, Instant};

use clap::CommandFactory;
use kube::Api;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::common::served::{Embedded, PER_OBJECT_FAMILIES, metrics_page};

/// The command that rewrites the pages.
const REGENERATE: &str = "TEPHRA_BLESS=1 cargo test --test it reference_docs::";

/// The first line of every generated page.
fn header() -> String {
    format!(
        "<!-- Generated from the code by tests/it/reference_docs.rs: do not edit. \
         Regenerate with `{REGENERATE}`. -->\n"
    )
}

/// Compares `rendered` with the committed `page` (a path from the repository's root), or
/// writes it when `TEPHRA_BLESS=1`.
fn check(page: &str, rendered: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(page);
    if std::env::var("TEPHRA_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, rendered).unwrap_or_else(|e| panic!("writing {page}: {e}"));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != rendered {
        panic!(
            "{page} differs from what the code says ('-' the committed page, '+' the code); \
             run `{REGENERATE}` and commit the result:\n{}",
            diff(&committed, rendered)
        );
    }
}

/// The lines that differ, as a unified-style listing (at most 60 lines).
fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    // Longest common subsequence table, from the end.
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("{:>5} - {}", i + 1, a[i]));
            i += 1;
        } else {
            out.push(format!("{:>5} + {}", j + 1, b[j]));
            j += 1;
        }
    }
    let more = out.len().saturating_sub(60);
    out.truncate(60);
    if more > 0 {
        out.push(format!("... and {more} more lines"));
    }
    out.join("\n")
}

/// Text for one cell of a Markdown table.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

// ---------------------------------------------------------------------------------------------
// The command line

/// One flag or argument as a table row: flag, default, env, help.
fn arg_row(arg: &clap::Arg) -> [String; 4] {
    let takes_value = arg.get_action().takes_values();
    let names: Vec<String> = arg
        .get_value_names()
        .map(|v| v.iter().map(|n| n.to_string()).collect())
        .unwrap_or_else(|| vec![arg.get_id().as_str().to_uppercase()]);
    let value = names
        .iter()
        .map(|n| format!("<{n}>"))
        .collect::<Vec<_>>()
        .join(" ");
    let optional_value = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
    let mut spellings = Vec::new();
    if arg.is_positional() {
        spellings.push(format!("`{value}`"));
    } else {
        let mut forms = Vec::new();
        if let Some(s) = arg.get_short() {
            forms.push(format!("-{s}"));
        }
        for s in arg.get_visible_short_aliases().unwrap_or_default() {
            forms.push(format!("-{s}"));
        }
        if let Some(l) = arg.get_long() {
            forms.push(format!("--{l}"));
        }
        for l in arg.get_visible_aliases().unwrap_or_default() {
            forms.push(format!("--{l}"));
        }
        let suffix = match (takes_value, optional_value) {
            (false, _) => String::new(),
            (true, true) => format!("[={value}]"),
            (true, false) => format!(" {value}"),
        };
        spellings.extend(forms.iter().map(|f| format!("`{f}{suffix}`")));
    }
    let mut flag = spellings.join(", ");
    if matches!(arg.get_action(), clap::ArgAction::Append) {
        flag.push_str(" (repeatable)");
    }
    if arg.is_required_set() {
        flag.push_str(" (required)");
    }
    let default = if takes_value {
        arg.get_default_values()
            .iter()
            .map(|v| format!("`{}`", v.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(", ")
    } else {
        String::new()
    };
    let env = arg
        .get_env()
        .map(|e| format!("`{}`", e.to_string_lossy()))
        .unwrap_or_default();
    let mut help = arg
        .get_long_help()
        .or(arg.get_help())
        .map(|h| h.to_string())
        .unwrap_or_default();
    let values: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| match v.get_help() {
            Some(h) => format!(
                "`{}`: {}",
                v.get_name(),
                h.to_string().trim_end_matches('.')
            ),
            None => format!("`{}`", v.get_name()),
        })
        .collect();
    // clap drops the full stop that ends a one-paragraph help text.
    let help_ends = help.trim_end().ends_with(['.', ':', '!', '?']);
    if !help.is_empty() && !help_ends {
        help = format!("{}.", help.trim_end());
    }
    // A bool flag's possible values (`true`, `false`) say nothing a reader needs, and values
    // the help already names need no description of their own.
    let names: Vec<String> = arg
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    let bool_values = names.len() == 2 && names.iter().all(|v| v == "true" || v == "false");
    if !names.is_empty() && !bool_values {
        let listed = if names.iter().all(|n| help.contains(n.as_str())) {
            names
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        } else {
            values.join("; ")
        };
        help.push_str(&format!(" Values: {listed}."));
    }
    [cell(&flag), cell(&default), cell(&env), cell(&help)]
}

/// The section of one command and, below it, of its subcommands.
fn command_section(
    out: &mut String,
    cmd: &clap::Command,
    path: &str,
    depth: usize,
    globals: &BTreeSet<String>,
) {
    let hashes = "#".repeat(depth.min(4));
    out.push_str(&format!("\n{hashes} `{path}`\n\n"));
    if let Some(about) = cmd.get_long_about().or(cmd.get_about()) {
        // Each line of a command's description is a paragraph of its own.
        let about = about.to_string();
        let paragraphs: Vec<&str> = about.lines().filter(|l| !l.trim().is_empty()).collect();
        out.push_str(&paragraphs.join("\n\n"));
        out.push('\n');
    }
    let aliases: Vec<&str> = cmd.get_visible_aliases().collect();
    if !aliases.is_empty() {
        out.push_str(&format!(
            "\nAlso spelled: {}.\n",
            aliases
                .iter()
                .map(|a| format!("`{}`", path.replace(cmd.get_name(), a)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let usage = cmd.clone().render_usage().to_string();
    let usage = usage.trim().trim_start_matches("Usage:").trim();
    out.push_str(&format!("\n```text\n{usage}\n```\n"));
    let mut inherited = globals.clone();
    let args: Vec<&clap::Arg> = cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter(|a| !["help", "version"].contains(&a.get_id().as_str()))
        .filter(|a| !globals.contains(a.get_id().as_str()))
        .collect();
    if !args.is_empty() {
        out.push_str("\n| flag | default | env | meaning |\n| --- | --- | --- | --- |\n");
        for a in &args {
            let [flag, default, env, help] = arg_row(a);
            out.push_str(&format!("| {flag} | {default} | {env} | {help} |\n"));
            if a.is_global_set() {
                inherited.insert(a.get_id().to_string());
            }
        }
        let taken: Vec<&&clap::Arg> = args.iter().filter(|a| a.is_global_set()).collect();
        if !taken.is_empty() && cmd.has_subcommands() {
            out.push_str(&format!(
                "\n{} also taken by every `{path}` subcommand below.\n",
                taken
                    .iter()
                    .map(|a| format!("`--{}`", a.get_long().unwrap_or(a.get_id().as_str())))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() == "help" {
            continue;
        }
        command_section(
            out,
            sub,
            &format!("{path} {}", sub.get_name()),
            depth + 1,
            &inherited,
        );
    }
}

fn cli_page() -> String {
    let mut cmd = tephra::cli::Cli::command();
    cmd.build();
    let mut out = header();
    out.push_str("# Command-line reference\n\n");
    out.push_str(
        "Every subcommand of `tephra` and its flags, as `tephra <subcommand> --help` describes \
         them. Durations are Go durations (`500ms`, `1m30s`); a flag with an env column can \
         also be set by that environment variable. How to use the commands together is in \
         [Using the command line](../getting-started/command-line.md).\n",
    );
    if let Some(about) = cmd.get_about() {
        out.push_str(&format!("\n{about}\n"));
    }
    out.push_str("\n```text\n");
    out.push_str(
        cmd.clone()
            .render_usage()
            .to_string()
            .trim()
            .trim_start_matches("Usage:")
            .trim(),
    );
    out.push_str("\n```\n\n| subcommand | what it does |\n| --- | --- |\n");
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        out.push_str(&format!(
            "| [`tephra {0}`](#tephra-{0}) | {1} |\n",
            sub.get_name(),
            cell(&sub.get_about().map(|a| a.to_string()).unwrap_or_default())
        ));
    }
    out.push_str("\n## Global flags\n\nTaken by every subcommand.\n\n");
    out.push_str("| flag | default | env | meaning |\n| --- | --- | --- | --- |\n");
    let mut globals = BTreeSet::new();
    for a in cmd.get_arguments().filter(|a| a.is_global_set()) {
        if ["help", "version"].contains(&a.get_id().as_str()) {
            continue;
        }
        let [flag, default, env, help] = arg_row(a);
        out.push_str(&format!("| {flag} | {default} | {env} | {help} |\n"));
        globals.insert(a.get_id().to_string());
    }
    globals.insert("help".into());
    globals.insert("version".into());
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        command_section(
            &mut out,
            sub,
            &format!("tephra {}", sub.get_name()),
            2,
            &globals,
        );
    }
    out
}

#[test]
fn the_command_line_page_is_what_clap_says() {
    check("docs/reference/command-line.md", &cli_page());
}

// ---------------------------------------------------------------------------------------------
// Metrics

/// One metric family of a `/metrics` page.
#[derive(Debug, Default, Clone, PartialEq)]
struct Family {
    kind: String,
    help: String,
    labels: BTreeSet<String>,
}

/// The label names of a sample line's `{...}` (values may hold escaped quotes and commas).
fn label_names(labels: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut chars = labels.chars().peekable();
    loop {
        let name: String = chars
            .by_ref()
            .skip_while(|c| *c == ',' || c.is_whitespace())
            .take_while(|c| *c != '=')
            .collect();
        if name.is_empty() {
            break;
        }
        names.push(name.trim().to_string());
        // The quoted value.
        if chars.next() != Some('"') {
            break;
        }
        let mut escaped = false;
        for c in chars.by_ref() {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => break,
                _ => {}
            }
        }
    }
    names
}

/// The families of a Prometheus text page, by name.
fn families(page: &str) -> BTreeMap<String, Family> {
    let mut out: BTreeMap<String, Family> = BTreeMap::new();
    for line in page.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            out.entry(name.to_string()).or_default().help =
                help.replace("\\n", " ").replace("\\\\", "\\");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            out.entry(name.to_string()).or_default().kind = kind.to_string();
        } else if !line.starts_with('#') && !line.trim().is_empty() {
            let end = line.find(['{', ' ']).unwrap_or(line.len());
            let sample = &line[..end];
            // A histogram's or summary's samples carry suffixes of its family's name.
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .filter_map(|s| sample.strip_suffix(s))
                .find(|f| {
                    out.get(*f).is_some_and(|f| {
                        !f.kind.is_empty() && f.kind != "counter" && f.kind != "gauge"
                    })
                })
                .unwrap_or(sample)
                .to_string();
            let labels = line[end..]
                .strip_prefix('{')
                .and_then(|l| l.rsplit_once('}'))
                .map(|(l, _)| label_names(l))
                .unwrap_or_default();
            out.entry(family)
                .or_default()
                .labels
                .extend(labels.into_iter().filter(|l| l != "le" && l != "quantile"));
        }
    }
    out
}

fn metrics_reference(start: &BTreeMap<String, Family>, all: &BTreeMap<String, Family>) -> String {
    let mut out = header();
    out.push_str("# Metrics reference\n\n");
    out.push_str(
        "Every metric family on `/metrics` (served on `--metrics-listen`, and on `--listen` \
         over HTTPS), read from a running `tephra serve --embedded`. `volcano_*` families \
         keep the names and labels of Volcano's scheduler and controllers, so dashboards made \
         for Volcano read them; `tephra_*` are tephra's own; `process_*` come from the \
         Prometheus process collector (Linux). Families whose series exist only once there is \
         something to count say so; every other family has its series from the start, at 0 \
         until something happens, so an alert sees 0 and not \"no data\". How to watch them: \
         [Monitoring and alerts](../operate/monitoring.md).\n\n",
    );
    out.push_str("| metric | type | labels | help |\n| --- | --- | --- | --- |\n");
    for (name, f) in all {
        let labels = if f.labels.is_empty() {
            String::new()
        } else {
            f.labels
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut help = f.help.clone();
        if !start.contains_key(name) {
            help.push_str(" (No series until the first one is counted.)");
        }
        out.push_str(&format!(
            "| `{name}` | {} | {} | {} |\n",
            cell(&f.kind),
            labels,
            cell(&help)
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metrics_page_is_what_metrics_says() {
    let (served, client) = Embedded::start(&[]).await;
    // The series present once the first session has run (the queues have their status) and
    // nothing new has appeared for a second: what an idle tephra exports.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut start = families(&metrics_page(&served.metrics).await);
    let mut settled_since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = families(&metrics_page(&served.metrics).await);
        if now.keys().ne(start.keys()) {
            settled_since = Instant::now();
        }
        start = now;
        let ready = start.contains_key("volcano_queue_allocated_milli_cpu")
            && settled_since.elapsed() >= Duration::from_secs(1);
        if ready || Instant::now() > deadline {
            break;
        }
    }
    // A gang too big for the cluster: its job changes phase and its tasks cannot be placed.
    let job: tephra::api::Job = serde_json::from_value(json!({
        "apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
        "metadata": {"name": "too-big", "namespace": "default"},
        "spec": {"minAvailable": 40, "schedulerName": "volcano", "tasks": [{
            "name": "worker", "replicas": 40,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{
                "name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": "1"}}}]}}}]}
    }))
    .unwrap();
    let jobs: Api<tephra::api::Job> = Api::namespaced(client.clone(), "default");
    let mut tries = 0;
    loop {
        match jobs.create(&PostParams::default(), &job).await {
            Ok(_) => break,
            Err(e) if tries < 50 && crate::common::gangs::queue_not_seen_yet(&e) => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("creating the vcJob: {e}"),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut all = families(&metrics_page(&served.metrics).await);
    while !PER_OBJECT_FAMILIES.iter().all(|f| all.contains_key(*f)) {
        assert!(
            Instant::now() < deadline,
            "{PER_OBJECT_FAMILIES:?} never appeared on /metrics"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        all = families(&metrics_page(&served.metrics).await);
    }
    for name in start.keys() {
        assert!(all.contains_key(name), "{name} vanished from /metrics");
    }
    check(
        "docs/reference/metrics.md",
        &metrics_reference(&start, &all),
    );
}

// ---------------------------------------------------------------------------------------------
// Admission webhooks

/// `[a, b]` of a YAML list as `a, b`.
fn joined(v: Option<&Value>) -> String {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|x| match x.as_str() {
                    Some("") => "\"\" (core)".to_string(),
                    Some(s) => s.to_string(),
                    None => x.to_string(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

fn webhooks_page() -> String {
    let configs =
        tephra::cluster::webhooks::configurations(tephra::cluster::webhooks::WEBHOOKS_YAML, "")
            .unwrap_or_else(|e| panic!("{e}"));
    // Every registered webhook by path.
    let mut registered: BTreeMap<String, Vec<(String, String, &Value)>> = BTreeMap::new();
    for c in &configs {
        let kind = c["kind"].as_str().unwrap_or_default().to_string();
        let name = c["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for hook in c["webhooks"].as_array().into_iter().flatten() {
            let path = hook["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            registered
                .entry(path)
                .or_default()
                .push((kind.clone(), name.clone(), hook));
        }
    }
    let mut out = header();
    out.push_str("# Admission webhooks reference\n\n");
    out.push_str(
        "Every admission webhook path tephra serves on `--listen` (HTTPS), with the kinds it \
         admits, and how `manifests/webhooks.yaml` (the file the kustomize base and embedded \
         mode apply; the Helm chart renders the same) registers it. What each webhook checks \
         and changes is in [Endpoints and admission](endpoints-and-admission.md).\n\n",
    );
    out.push_str(
        "| path | admits | configuration | webhook | operations | resources | failure policy | timeout |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for w in tephra::admission::WEBHOOKS {
        let kinds = w
            .kinds
            .iter()
            .map(|(g, k)| {
                if g.is_empty() {
                    format!("`{k}`")
                } else {
                    format!("`{k}` ({g})")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        match registered.get(w.path) {
            None => out.push_str(&format!(
                "| `{}` | {kinds} | not registered | | | | | |\n",
                w.path
            )),
            Some(hooks) => {
                for (kind, config, hook) in hooks {
                    let rules = hook["rules"].as_array().cloned().unwrap_or_default();
                    let ops = rules
                        .iter()
                        .map(|r| joined(r.get("operations")))
                        .collect::<BTreeSet<_>>()
                        .into_iter()
                        .collect::<Vec<_>>()
                        .join("; ");
                    let resources = rules
                        .iter()
                        .map(|r| {
                            format!(
                                "{} in {} {} ({})",
                                joined(r.get("resources")),
                                joined(r.get("apiGroups")),
                                joined(r.get("apiVersions")),
                                r["scope"].as_str().unwrap_or("*")
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; ");
                    out.push_str(&format!(
                        "| `{}` | {kinds} | {kind} `{config}` | `{}` | {ops} | {} | {} | {} s |\n",
                        w.path,
                        hook["name"].as_str().unwrap_or_default(),
                        cell(&resources),
                        hook["failurePolicy"].as_str().unwrap_or("Fail"),
                        hook["timeoutSeconds"]
                            .as_u64()
                            .map_or("10".to_string(), |t| t.to_string())
                    ));
                }
            }
        }
    }
    let unknown: Vec<&String> = registered
        .keys()
        .filter(|p| {
            !tephra::admission::WEBHOOKS
                .iter()
                .any(|w| w.path == p.as_str())
        })
        .collect();
    assert!(
        unknown.is_empty(),
        "manifests/webhooks.yaml registers paths tephra does not serve: {unknown:?}"
    );
    // What every registration shares, or how they differ.
    let mut common = BTreeMap::<&str, BTreeSet<String>>::new();
    let mut selectors = BTreeSet::new();
    for hooks in registered.values() {
        for (_, _, hook) in hooks {
            for key in [
                "matchPolicy",
                "sideEffects",
                "admissionReviewVersions",
                "reinvocationPolicy",
            ] {
                let v = match &hook[key] {
                    Value::Array(_) => joined(Some(&hook[key])),
                    Value::Null => "(not set)".to_string(),
                    v => v.as_str().map_or(v.to_string(), str::to_string),
                };
                common.entry(key).or_default().insert(v);
            }
            for e in hook["namespaceSelector"]["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
            {
                selectors.insert(format!(
                    "`{}` {} {}",
                    e["key"].as_str().unwrap_or_default(),
                    e["operator"].as_str().unwrap_or_default(),
                    joined(e.get("values"))
                ));
            }
        }
    }
    out.push_str("\nEvery registration:\n\n");
    for (key, values) in &common {
        out.push_str(&format!(
            "- `{key}`: {}\n",
            values
                .iter()
                .map(|v| format!("`{v}`"))
                .collect::<Vec<_>>()
                .join(" or ")
        ));
    }
    for s in &selectors {
        out.push_str(&format!(
            "- namespace selector (namespaced resources): {s} (these namespaces are never sent)\n"
        ));
    }
    let mut conditioned = String::new();
    for hooks in registered.values() {
        for (_, _, hook) in hooks {
            for c in hook["matchConditions"].as_array().into_iter().flatten() {
                conditioned.push_str(&format!(
                    "- `{}` (`{}`): `{}`\n",
                    hook["name"].as_str().unwrap_or_default(),
                    c["name"].as_str().unwrap_or_default(),
                    c["expression"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    if !conditioned.is_empty() {
        out.push_str(
            "\nWebhooks sent only the objects for which their `matchConditions` hold \
             (kube-apiserver evaluates them; the others are allowed without a review):\n\n",
        );
        out.push_str(&conditioned);
    }
    out.push_str(
        "\nEach path answers `admission.k8s.io/v1` AdmissionReviews (and `v1beta1` in \
         `v1beta1`); a review of a kind the path does not admit is answered HTTP 400.\n",
    );
    out
}

#[test]
fn the_webhooks_page_is_what_the_webhook_table_and_manifests_say() {
    check("docs/reference/webhooks.md", &webhooks_page());
}

// ---------------------------------------------------------------------------------------------
// The scheduler configuration

/// A source file of the scheduler crate.
fn scheduler_source(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/scheduler/src")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Rustdoc's `[`x`]` and `[text](link)` links as plain text.
fn unlink(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find('[') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        match after.find(']') {
            Some(j) => {
                out.push_str(&after[..j]);
                let tail = &after[j + 1..];
                rest = match tail.strip_prefix('(') {
                    Some(t) => t.find(')').map_or(tail, |k| &t[k + 1..]),
                    None => tail,
                };
            }
            None => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The first paragraph of a module's `//!` documentation, on one line.
fn module_summary(src: &str) -> String {
    let lines: Vec<&str> = src
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(str::trim)
        .take_while(|l| !l.is_empty())
        .collect();
    unlink(&lines.join(" "))
}

/// The serde field names a `deny_unknown_fields` struct expects, from its error for an
/// unknown key in `yaml` (`unknown field `x`, expected one of a, b --> <input>:1:1 ...`).
fn expected_fields(yaml: &str) -> Vec<String> {
    let err = tephra_scheduler::config::parse(yaml, "probe")
        .err()
        .unwrap_or_else(|| panic!("the probe was accepted:\n{yaml}"))
        .to_string();
    let list = err
        .split_once("expected one of ")
        .map(|(_, l)| l.split(" -->").next().unwrap_or(l))
        .unwrap_or_else(|| panic!("no list of expected fields in: {err}"));
    let fields: Vec<String> = list
        .split(',')
        .map(|f| f.trim().trim_matches('`').to_string())
        .filter(|f| !f.is_empty())
        .collect();
    assert!(
        fields
            .iter()
            .all(|f| f.chars().all(|c| c.is_ascii_alphanumeric())),
        "unexpected list of fields in: {err}"
    );
    fields
}

/// `camelCase` as `snake_case`.
fn snake(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The `///` documentation of field `field` of `struct_name` in `src`, on one line.
fn field_doc(src: &str, struct_name: &str, field: &str) -> String {
    let Some(start) = src.find(&format!("pub struct {struct_name} ")) else {
        return String::new();
    };
    let body = &src[start..];
    let body = &body[..body.find("\n}").unwrap_or(body.len())];
    let mut doc: Vec<&str> = Vec::new();
    for line in body.lines().map(str::trim) {
        if let Some(d) = line.strip_prefix("///") {
            doc.push(d.trim());
        } else if line.starts_with(&format!("pub {field}:")) {
            return unlink(&doc.join(" "));
        } else if !line.starts_with("#[") {
            doc.clear();
        }
    }
    String::new()
}

/// The argument keys a plugin's source reads with `float_arg("key", ..)` and
/// `string_arg(.., "key" or CONST)`.
fn arguments_read(src: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    for (call, nth) in [("float_arg(", 0), ("bool_arg(", 0), ("string_arg(", 1)] {
        for (i, _) in src.match_indices(call) {
            let args = &src[i + call.len()..];
            let args = &args[..args.find(')').unwrap_or(args.len())];
            let Some(arg) = args.split(',').nth(nth).map(str::trim) else {
                continue;
            };
            if let Some(lit) = arg.strip_prefix('"').and_then(|a| a.strip_suffix('"')) {
                keys.insert(lit.to_string());
            } else if let Some(v) = src
                .split_once(&format!("const {arg}: &str = \""))
                .and_then(|(_, rest)| rest.split_once('"'))
            {
                keys.insert(v.0.to_string());
            }
        }
    }
    keys
}

fn scheduler_config_page() -> String {
    use tephra_scheduler::config::{
        ALWAYS_ON_PLUGINS, DEFAULT_CONFIG, KNOWN_ACTIONS, KNOWN_PLUGINS, SchedulerConf,
        VOLCANO_ONLY_PLUGINS,
    };
    let config_rs = scheduler_source("config.rs");
    let plugins_rs = scheduler_source("plugins/mod.rs");
    let builtin = SchedulerConf::builtin();
    let mut out = header();
    out.push_str("# Scheduler configuration reference\n\n");
    out.push_str(
        "`tephra serve --config FILE` reads Volcano's scheduler-conf YAML (without it, the \
         built-in configuration below). A file written for Volcano's scheduler loads as it is. \
         An unknown key, action or plugin refuses the file, naming it and its line; Volcano's \
         plugins that tephra does not run are accepted, left out and named in a warning (refused \
         with `--strict-config`). The \
         file is checked at start and re-read when it changes; a bad new version keeps the old \
         configuration. How the session uses it: [Scheduling session](../concepts/scheduling.md).\n",
    );

    out.push_str("\n## Keys\n\n| key | meaning |\n| --- | --- |\n");
    for key in expected_fields("nonsense: 1\nactions: enqueue\n") {
        out.push_str(&format!(
            "| `{key}` | {} |\n",
            cell(&field_doc(&config_rs, "SchedulerConf", &snake(&key)))
        ));
    }
    for key in expected_fields("actions: enqueue\ntiers:\n- nonsense: 1\n") {
        out.push_str(&format!(
            "| `tiers[].{key}` | {} |\n",
            cell(&field_doc(&config_rs, "Tier", &snake(&key)))
        ));
    }
    for key in
        expected_fields("actions: enqueue\nconfigurations:\n- name: enqueue\n  nonsense: 1\n")
    {
        out.push_str(&format!(
            "| `configurations[].{key}` | {} |\n",
            cell(&field_doc(&config_rs, "ActionConfiguration", &snake(&key)))
        ));
    }
    let switches =
        expected_fields("actions: enqueue\ntiers:\n- plugins:\n  - name: gang\n    nonsense: 1\n");
    for key in switches.iter().filter(|k| !k.starts_with("enable")) {
        out.push_str(&format!(
            "| `tiers[].plugins[].{key}` | {} |\n",
            cell(&field_doc(&config_rs, "PluginOption", &snake(key)))
        ));
    }
    out.push_str(
        "| `tiers[].plugins[].enable*` | the plugin's switches, below; each is on when not \
         given |\n",
    );

    out.push_str("\n## Actions\n\nRun in the order `actions` lists them (comma-separated).\n\n");
    // The anchors let other pages include the table (mdBook's `{{#include FILE:actions}}`).
    out.push_str("<!-- ANCHOR: actions -->\n\n");
    out.push_str(
        "| action | in the built-in configuration | what it does |\n| --- | --- | --- |\n",
    );
    for a in KNOWN_ACTIONS {
        let src = scheduler_source(&format!("actions/{a}.rs"));
        out.push_str(&format!(
            "| `{a}` | {} | {} |\n",
            if builtin.has_action(a) { "yes" } else { "no" },
            cell(&module_summary(&src))
        ));
    }

    out.push_str("\n<!-- ANCHOR_END: actions -->\n");
    out.push_str(
        "\n## Plugins\n\nListed in `tiers`; within a tier plugins vote together, and a later \
         tier is asked only when the earlier ones decide nothing. Arguments go under the \
         plugin's `arguments`.\n\n",
    );
    out.push_str("<!-- ANCHOR: plugins -->\n\n");
    out.push_str(
        "| plugin | built-in tier | what it does, and its arguments |\n| --- | --- | --- |\n",
    );
    for p in KNOWN_PLUGINS {
        let module = plugins_rs
            .split_once(&format!("\"{p}\" => Box::new("))
            .and_then(|(_, rest)| rest.split_once("::"))
            .map(|(m, _)| m.trim().to_string())
            .unwrap_or_else(|| panic!("plugins/mod.rs builds no plugin {p:?}"));
        let src = scheduler_source(&format!("plugins/{module}.rs"));
        let mut summary = module_summary(&src);
        let whole_doc: String = src.lines().map_while(|l| l.strip_prefix("//!")).collect();
        let mut unnamed = Vec::new();
        for key in arguments_read(&src) {
            assert!(
                whole_doc.contains(&key),
                "plugin {p} reads argument {key:?}, which its module documentation \
                 (plugins/{module}.rs) does not name"
            );
            if !summary.contains(&key) {
                unnamed.push(format!("`{key}`"));
            }
        }
        if !unnamed.is_empty() {
            summary.push_str(&format!(" Arguments: {}.", unnamed.join(", ")));
        }
        let tier = builtin
            .tiers
            .iter()
            .position(|t| t.plugins.iter().any(|o| o.name == *p))
            .map_or(String::new(), |i| (i + 1).to_string());
        // A Rust module cannot have a `-` in its name (`task-topology` is `tasktopology`).
        let summary = if module.replace('_', "") == p.replace('-', "") {
            summary
        } else {
            format!("Volcano's `{p}`, run by the `{module}` plugin's code: {summary}")
        };
        out.push_str(&format!("| `{p}` | {tier} | {} |\n", cell(&summary)));
    }
    out.push_str(
        "\nVolcano's plugins whose behaviour tephra always has: naming one in a configuration \
         is accepted and changes nothing.\n\n| plugin | what tephra does |\n| --- | --- |\n",
    );
    for (p, does) in ALWAYS_ON_PLUGINS {
        out.push_str(&format!("| `{p}` | {} |\n", cell(does)));
    }
    out.push_str(
        "\nVolcano's plugins that tephra accepts in a configuration and does not run. Each is \
         named in a warning at start and in the gauge `tephra_scheduler_plugin_ignored{plugin}` \
         (1 while the configuration names it); `--strict-config` refuses such a \
         configuration.\n\n| plugin | what leaving it out changes |\n| --- | --- |\n",
    );
    for (p, changes) in VOLCANO_ONLY_PLUGINS {
        out.push_str(&format!("| `{p}` | {} |\n", cell(changes)));
    }
    out.push_str("\n<!-- ANCHOR_END: plugins -->\n");

    out.push_str(
        "\n## Plugin switches\n\nVolcano's `enable*` switches of a plugin entry, each on unless \
         set to `false`. The session reads those marked *used*; the others are accepted so a \
         Volcano file loads, and change nothing.\n\n| switch | |\n| --- | --- |\n",
    );
    // Where a session could read a switch: the framework, the session, its outcome, every
    // action and every plugin.
    let mut session_sources: String = ["framework.rs", "session.rs", "outcome.rs"]
        .iter()
        .map(|f| scheduler_source(f))
        .collect();
    for dir in ["actions", "plugins"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("crates/scheduler/src")
            .join(dir);
        for entry in std::fs::read_dir(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        {
            let file = entry.unwrap_or_else(|e| panic!("{e}")).path();
            session_sources.push_str(&std::fs::read_to_string(&file).unwrap_or_default());
        }
    }
    for key in switches.iter().filter(|k| k.starts_with("enable")) {
        let used = session_sources.contains(&format!(".{}", snake(key)));
        out.push_str(&format!(
            "| `{key}` | {} |\n",
            if used { "used" } else { "accepted, not used" }
        ));
    }

    out.push_str("\n## The built-in configuration\n\nVolcano's default, used without `--config`:\n\n```yaml\n");
    out.push_str(DEFAULT_CONFIG.trim());
    out.push_str("\n```\n");
    out
}

#[test]
fn the_scheduler_configuration_page_is_what_the_scheduler_crate_says() {
    check(
        "docs/reference/scheduler-configuration.md",
        &scheduler_config_page(),
    );
}

#[test]
fn a_changed_page_fails_with_the_lines_that_differ() {
    let d = diff("a\nb\nc\n", "a\nB\nc\nd\n");
    assert_eq!(d, "    2 - b\n    2 + B\n    4 + d");
}
