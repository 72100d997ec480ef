//! `binpack`: prefers nodes that are already full, so large gangs find whole empty nodes.
//! Arguments: `binpack.weight` (1), `binpack.cpu` (1), `binpack.memory` (1),
//! `binpack.resources` ("a, b") with `binpack.resources.<name>` (1); negative weights are 1.

use std::collections::BTreeMap;

use crate::config::{PluginOption, string_arg};
use crate::framework::Plugin;
use crate::ix::{NodeIx, TaskIx};
use crate::session::State;

/// The plugin with its weights.
#[derive(Debug)]
pub struct Binpack {
    weight: f64,
    resources: BTreeMap<String, f64>,
}

impl Binpack {
    /// Reads the weights.
    pub fn new(o: &PluginOption) -> Self {
        let w = |key: &str| {
            let v = o.float_arg(key, 1.0);
            if v < 0.0 { 1.0 } else { v }
        };
        let mut resources = BTreeMap::new();
        resources.insert("cpu".to_string(), w("binpack.cpu"));
        resources.insert("memory".to_string(), w("binpack.memory"));
        if let Some(list) = string_arg(&o.arguments, "binpack.resources") {
            for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                resources.insert(name.to_string(), w(&format!("binpack.resources.{name}")));
            }
        }
        Self {
            weight: {
                let v = o.float_arg("binpack.weight", 1.0);
                if v < 0.0 { 1.0 } else { v }
            },
            resources,
        }
    }
}

impl Plugin for Binpack {
    fn name(&self) -> &'static str {
        "binpack"
    }

    fn node_score(&self, st: &State, t: TaskIx, n: NodeIx) -> f64 {
        if self.weight == 0.0 {
            return 0.0;
        }
        let node = &st.nodes[n];
        let req = &st.tasks[t].resreq;
        let mut score = 0.0;
        let mut weights = 0.0;
        for (name, w) in &self.resources {
            let want = req.get(name);
            if want <= 0.0 {
                continue;
            }
            weights += w;
            let cap = node.allocatable.get(name);
            if cap <= 0.0 || *w == 0.0 {
                continue;
            }
            let used = node.used.get(name) + want;
            if used > cap {
                return 0.0;
            }
            score += w * used / cap;
        }
        if weights == 0.0 {
            return 0.0;
        }
        score / weights * 100.0 * self.weight
    }
}
