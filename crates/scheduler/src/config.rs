//! The session configuration in Volcano's scheduler-conf YAML: `actions`, `tiers` of plugins
//! with their `enable*` switches and `arguments`, and per-action `configurations`. A file
//! written for Volcano's scheduler is read as it is; an unknown key or plugin is an error that
//! names it and its line, so a typo does not silently switch a feature off. Volcano's plugins
//! that tephra does not implement are accepted and left out, with a warning at each load.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Actions tephra runs, in Volcano's names.
pub const KNOWN_ACTIONS: &[&str] = &[
    "enqueue",
    "allocate",
    "backfill",
    "preempt",
    "reclaim",
    "gangpreempt",
    "gangreclaim",
];

/// Plugins tephra implements, in Volcano's names.
pub const KNOWN_PLUGINS: &[&str] = &[
    "priority",
    "gang",
    "conformance",
    "overcommit",
    "drf",
    "proportion",
    "capacity",
    "predicates",
    "nodeorder",
    "binpack",
    "sla",
    "nodegroup",
    "resourcequota",
    "pdb",
    "task-topology",
];

/// Volcano's plugins whose behaviour tephra's session always has, whether a configuration
/// names them or not, each with where it lives. Naming one is accepted and changes nothing;
/// its arguments are not read.
pub const ALWAYS_ON_PLUGINS: &[(&str, &str)] = &[(
    "network-topology-aware",
    "a PodGroup's `networkTopology` is always honoured: the allocate and backfill actions place a gang inside one HyperNode of the tiers it allows (lowest tier first, the fullest HyperNode with room first), or, in `hard` mode, leave it waiting",
)];

/// Volcano's other plugins (`pkg/scheduler/plugins/factory.go` of v1.14), which tephra does not
/// implement, each with what leaving it out changes. A configuration naming one still loads,
/// since a file written for Volcano's scheduler must (its Helm chart's CI configuration has
/// `network-topology-aware`): the plugin is left out of the session, named in a warning and in
/// the `tephra_scheduler_plugin_ignored` gauge, and refused with `--strict-config`
/// ([`require_all_run`]). A name in neither list is refused: that is a typo.
pub const VOLCANO_ONLY_PLUGINS: &[(&str, &str)] = &[
    (
        "cdp",
        "a preemptable pod is not protected from preemption and reclaim during its cool-down time after it starts",
    ),
    (
        "deviceshare",
        "shared GPUs (GPU memory and GPU number requests) are not fitted per device; only the node's allocatable counts",
    ),
    (
        "extender",
        "Volcano's HTTP scheduler extenders are not called",
    ),
    (
        "numa-aware",
        "a task's NUMA topology policy does not filter or score nodes",
    ),
    (
        "rescheduling",
        "running pods are never moved off loaded nodes",
    ),
    (
        "resource-strategy-fit",
        "no per-resource scoring strategy: `nodeorder` and `binpack` score nodes",
    ),
    (
        "tdm",
        "revocable zones and their time windows are not honoured",
    ),
    (
        "usage",
        "nodes are filtered and scored by requests only, not by their measured usage",
    ),
];

/// Whether `name` is one of Volcano's plugins tephra does not run.
pub fn is_volcano_only(name: &str) -> bool {
    VOLCANO_ONLY_PLUGINS.iter().any(|(n, _)| *n == name)
}

/// With `--strict-config`: refuses a configuration that names plugins tephra does not run,
/// so it never quietly means less than it says.
pub fn require_all_run(conf: &SchedulerConf, origin: &str) -> Result<(), ConfigError> {
    let ignored = conf.ignored_plugins();
    if ignored.is_empty() {
        return Ok(());
    }
    Err(ConfigError::NotRun {
        origin: origin.to_string(),
        plugins: ignored.join(", "),
    })
}

/// Volcano's built-in configuration (`pkg/scheduler/util.go`), used without `--config`.
pub const DEFAULT_CONFIG: &str = r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
"#;

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read scheduler configuration {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not parse or has a key Volcano's format does not have.
    #[error("scheduler configuration {origin}: {message}")]
    Parse {
        /// The file, or `built-in`.
        origin: String,
        /// The parser's message (line, column and key).
        message: String,
    },
    /// A value is not allowed.
    #[error("scheduler configuration {origin}: {message}")]
    Invalid {
        /// The file, or `built-in`.
        origin: String,
        /// What is wrong.
        message: String,
    },
    /// `--strict-config`, and the configuration names plugins tephra does not run.
    #[error(
        "scheduler configuration {origin} names Volcano plugins tephra does not run: {plugins} \
         (--strict-config refuses it; remove them from `tiers`, or run without --strict-config \
         to have them left out with a warning)"
    )]
    NotRun {
        /// The file, or `built-in`.
        origin: String,
        /// The plugins, comma-separated, in the order the tiers name them.
        plugins: String,
    },
}

/// A whole configuration, as parsed.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SchedulerConf {
    /// Comma-separated action names, run in this order.
    #[serde(default)]
    pub actions: String,
    /// Plugin tiers.
    #[serde(default)]
    pub tiers: Vec<Tier>,
    /// Per-action arguments.
    #[serde(default)]
    pub configurations: Vec<ActionConfiguration>,
    /// Volcano's metrics-source settings; accepted and unused.
    #[serde(default)]
    pub metrics: Option<BTreeMap<String, String>>,
}

/// One tier of plugins.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Tier {
    /// The plugins of the tier, in order.
    #[serde(default)]
    pub plugins: Vec<PluginOption>,
}

/// Arguments of one action.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ActionConfiguration {
    /// Action name.
    pub name: String,
    /// Its arguments.
    #[serde(default)]
    pub arguments: Arguments,
}

/// Plugin or action arguments: YAML scalars by key.
pub type Arguments = BTreeMap<String, serde_json::Value>;

/// One plugin in a tier, with Volcano's switches. Every switch defaults to on.
#[allow(missing_docs)]
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginOption {
    /// Plugin name.
    pub name: String,
    #[serde(default)]
    pub enable_job_order: Option<bool>,
    #[serde(default)]
    pub enable_hierarchy: Option<bool>,
    #[serde(default)]
    pub enable_job_ready: Option<bool>,
    #[serde(default)]
    pub enable_job_pipelined: Option<bool>,
    #[serde(default)]
    pub enable_task_order: Option<bool>,
    #[serde(default)]
    pub enable_preemptable: Option<bool>,
    #[serde(default)]
    pub enable_reclaimable: Option<bool>,
    #[serde(default)]
    pub enable_preemptive: Option<bool>,
    #[serde(default)]
    pub enable_queue_order: Option<bool>,
    #[serde(default, rename = "enabledClusterOrder")]
    pub enabled_cluster_order: Option<bool>,
    #[serde(default)]
    pub enable_predicate: Option<bool>,
    #[serde(default)]
    pub enable_best_node: Option<bool>,
    #[serde(default)]
    pub enable_node_order: Option<bool>,
    #[serde(default)]
    pub enable_target_job: Option<bool>,
    #[serde(default)]
    pub enable_reserved_nodes: Option<bool>,
    #[serde(default)]
    pub enable_job_enqueued: Option<bool>,
    #[serde(default, rename = "enabledVictim")]
    pub enabled_victim: Option<bool>,
    #[serde(default)]
    pub enable_job_starving: Option<bool>,
    #[serde(default, rename = "enabledOverused")]
    pub enabled_overused: Option<bool>,
    #[serde(default, rename = "enabledAllocatable")]
    pub enabled_allocatable: Option<bool>,
    #[serde(default, rename = "enabledHyperNodeOrder")]
    pub enabled_hyper_node_order: Option<bool>,
    #[serde(default, rename = "enabledSubJobReady")]
    pub enabled_sub_job_ready: Option<bool>,
    #[serde(default, rename = "enabledSubJobPipelined")]
    pub enabled_sub_job_pipelined: Option<bool>,
    #[serde(default, rename = "enabledSubJobOrder")]
    pub enabled_sub_job_order: Option<bool>,
    #[serde(default, rename = "enabledHyperNodeGradient")]
    pub enabled_hyper_node_gradient: Option<bool>,
    /// Plugin arguments.
    #[serde(default)]
    pub arguments: Arguments,
}

/// Reads an on/off switch: unset means on.
pub fn on(flag: Option<bool>) -> bool {
    flag.unwrap_or(true)
}

impl PluginOption {
    /// A float argument, or `default` when missing or not a number.
    pub fn float_arg(&self, key: &str, default: f64) -> f64 {
        float_arg(&self.arguments, key, default)
    }

    /// A boolean argument (`true`/`false`, or those words as strings), or `default` when
    /// missing or anything else.
    pub fn bool_arg(&self, key: &str, default: bool) -> bool {
        bool_arg(&self.arguments, key, default)
    }
}

/// A boolean argument of an argument map.
pub fn bool_arg(args: &Arguments, key: &str, default: bool) -> bool {
    match args.get(key) {
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::String(s)) => s.trim().parse().unwrap_or(default),
        _ => default,
    }
}

/// A float argument of an argument map (numbers and numeric strings are accepted, as
/// Volcano's `GetFloat64` does).
pub fn float_arg(args: &Arguments, key: &str, default: f64) -> f64 {
    match args.get(key) {
        Some(serde_json::Value::Number(n)) => n.as_f64().unwrap_or(default),
        Some(serde_json::Value::String(s)) => s.trim().parse().unwrap_or(default),
        _ => default,
    }
    .pipe_finite(default)
}

trait Finite {
    fn pipe_finite(self, default: f64) -> f64;
}
impl Finite for f64 {
    fn pipe_finite(self, default: f64) -> f64 {
        if self.is_finite() { self } else { default }
    }
}

/// A string argument.
pub fn string_arg<'a>(args: &'a Arguments, key: &str) -> Option<&'a str> {
    args.get(key).and_then(|v| v.as_str())
}

impl SchedulerConf {
    /// Volcano's built-in configuration.
    pub fn builtin() -> Self {
        // The constant is ours and tested; a failure here is a build defect.
        parse(DEFAULT_CONFIG, "built-in").unwrap_or_else(|e| panic!("{e}"))
    }

    /// The action names in order.
    pub fn action_names(&self) -> Vec<String> {
        self.actions
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// Volcano-only plugins the tiers name, in order: accepted, and not run by tephra.
    pub fn ignored_plugins(&self) -> Vec<&str> {
        self.tiers
            .iter()
            .flat_map(|t| &t.plugins)
            .map(|p| p.name.as_str())
            .filter(|n| is_volcano_only(n))
            .collect()
    }

    /// `true` when the named action is configured.
    pub fn has_action(&self, name: &str) -> bool {
        self.action_names().iter().any(|a| a == name)
    }

    /// The arguments of an action (empty when not configured).
    pub fn action_arguments(&self, name: &str) -> Arguments {
        self.configurations
            .iter()
            .find(|c| c.name == name)
            .map(|c| c.arguments.clone())
            .unwrap_or_default()
    }
}

/// Parses and checks a configuration. `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<SchedulerConf, ConfigError> {
    let conf: SchedulerConf = serde_saphyr::from_str(text).map_err(|e| ConfigError::Parse {
        origin: origin.to_string(),
        message: one_line(&e.to_string()),
    })?;
    let invalid = |message: String| ConfigError::Invalid {
        origin: origin.to_string(),
        message,
    };
    let actions = conf.action_names();
    if actions.is_empty() {
        return Err(invalid(
            "`actions` is empty; Volcano's default is \"enqueue, allocate, backfill\"".into(),
        ));
    }
    for a in &actions {
        if !KNOWN_ACTIONS.contains(&a.as_str()) {
            return Err(invalid(format!(
                "unknown action {a:?} in `actions` (known: {})",
                KNOWN_ACTIONS.join(", ")
            )));
        }
    }
    // As Volcano: the gang-aware eviction actions replace the pod-by-pod ones.
    let named = |a: &str| actions.iter().any(|x| x == a);
    if (named("gangpreempt") || named("gangreclaim")) && (named("preempt") || named("reclaim")) {
        return Err(invalid(
            "`gangpreempt` and `gangreclaim` may not be configured beside `preempt` and \
             `reclaim`: choose the gang-aware actions or the pod-by-pod ones"
                .into(),
        ));
    }
    for c in &conf.configurations {
        if !KNOWN_ACTIONS.contains(&c.name.as_str()) {
            return Err(invalid(format!(
                "unknown action {:?} in `configurations`",
                c.name
            )));
        }
    }
    for (i, tier) in conf.tiers.iter().enumerate() {
        let mut drf_hierarchy = false;
        let mut proportion = false;
        for p in &tier.plugins {
            if !KNOWN_PLUGINS.contains(&p.name.as_str())
                && !is_volcano_only(&p.name)
                && !ALWAYS_ON_PLUGINS.iter().any(|(n, _)| *n == p.name)
            {
                let not_run: Vec<&str> = VOLCANO_ONLY_PLUGINS.iter().map(|(n, _)| *n).collect();
                return Err(invalid(format!(
                    "unknown plugin {:?} in tier {} (known: {}; Volcano's {} are accepted and \
                     not run)",
                    p.name,
                    i + 1,
                    KNOWN_PLUGINS.join(", "),
                    not_run.join(", ")
                )));
            }
            drf_hierarchy |= p.name == "drf" && p.enable_hierarchy == Some(true);
            proportion |= p.name == "proportion";
        }
        if drf_hierarchy && proportion {
            return Err(invalid(format!(
                "tier {}: drf with enableHierarchy and proportion cannot be in the same tier",
                i + 1
            )));
        }
    }
    Ok(conf)
}

/// Reads and parses a configuration file.
pub fn load(path: &Path) -> Result<SchedulerConf, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text, &path.display().to_string())
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_is_volcanos_default() {
        let c = SchedulerConf::builtin();
        assert_eq!(c.action_names(), ["enqueue", "allocate", "backfill"]);
        let names: Vec<Vec<&str>> = c
            .tiers
            .iter()
            .map(|t| t.plugins.iter().map(|p| p.name.as_str()).collect())
            .collect();
        assert_eq!(
            names,
            [
                vec!["priority", "gang", "conformance"],
                vec!["overcommit", "drf", "predicates", "proportion", "nodeorder"]
            ]
        );
    }

    #[test]
    fn reads_volcanos_helm_configuration() {
        let text = r#"
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
    arguments:
      binpack.weight: 10
      binpack.cpu: "2"
"#;
        let c = parse(text, "test").unwrap();
        assert_eq!(c.tiers[0].plugins[1].enable_preemptable, Some(false));
        let binpack = &c.tiers[1].plugins[5];
        assert_eq!(binpack.float_arg("binpack.weight", 1.0), 10.0);
        assert_eq!(binpack.float_arg("binpack.cpu", 1.0), 2.0);
        assert_eq!(binpack.float_arg("binpack.memory", 1.0), 1.0);
    }

    #[test]
    fn errors_name_the_key_and_line() {
        let e = parse(
            "actions: \"enqueue\"\ntiers:\n- plugins:\n  - name: gang\n    enableJobOrdr: true\n",
            "f.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("enableJobOrdr"), "{e}");
        assert!(e.contains("line 5") || e.contains("5:"), "{e}");
        let e = parse("actions: \"enqueue, allocat\"\n", "f.yaml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown action \"allocat\""), "{e}");
        let e = parse(
            "actions: \"allocate\"\ntiers:\n- plugins:\n  - name: gangg\n",
            "f.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown plugin \"gangg\""), "{e}");
        let e = parse(
            "actions: allocate\ntiers:\n- plugins:\n  - name: drf\n    enableHierarchy: true\n  - name: proportion\n",
            "f.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot be in the same tier"), "{e}");
    }

    #[test]
    fn volcano_only_plugins_load_and_are_named_while_a_typo_is_refused() {
        // As Volcano's Helm chart configures its CI scheduler (network-topology-aware, whose
        // behaviour is always on here, beside the plugins tephra runs, sla among them), plus
        // one tephra does not run.
        let conf = parse(
            "actions: \"enqueue, allocate, backfill, reclaim, preempt\"\ntiers:\n- plugins:\n  \
             - name: priority\n  - name: gang\n    enablePreemptable: false\n  - name: sla\n    \
             arguments:\n      sla-waiting-time: 1h\n- plugins:\n  - name: predicates\n  \
             - name: network-topology-aware\n  - name: usage\n",
            "ci.conf",
        )
        .unwrap();
        assert_eq!(conf.ignored_plugins(), vec!["usage"]);
        for p in conf.tiers.iter().flat_map(|t| &t.plugins) {
            let runs = crate::plugins::build(p).is_some();
            assert_eq!(runs, KNOWN_PLUGINS.contains(&p.name.as_str()), "{}", p.name);
        }
        assert!(SchedulerConf::builtin().ignored_plugins().is_empty());
    }

    #[test]
    fn strict_refuses_a_configuration_naming_plugins_not_run_and_names_them() {
        let text = "actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n  - name: tdm\n  - name: usage\n";
        let conf = parse(text, "conf.yaml").unwrap();
        let e = require_all_run(&conf, "conf.yaml").unwrap_err().to_string();
        assert!(
            e.contains("conf.yaml names Volcano plugins tephra does not run: tdm, usage"),
            "{e}"
        );
        assert!(!e.contains('\n'), "one line: {e}");
        assert!(require_all_run(&SchedulerConf::builtin(), "built-in").is_ok());
    }

    #[test]
    fn every_plugin_not_run_says_what_leaving_it_out_changes() {
        for (name, changes) in VOLCANO_ONLY_PLUGINS {
            assert!(!KNOWN_PLUGINS.contains(name), "{name} is run");
            assert!(changes.len() > 20, "{name}: {changes:?}");
        }
        let e = parse(
            "actions: allocate\ntiers:\n- plugins:\n  - name: sla-typo\n",
            "f.yaml",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown plugin \"sla-typo\""), "{e}");
    }
}
