//! One module per plugin, each with Volcano's semantics and arguments.

use super::config::PluginOption;
use super::framework::Plugin;

pub mod binpack;
pub mod conformance;
pub mod drf;
pub mod gang;
pub mod hierarchy;
pub mod interpod;
pub mod nodegroup;
pub mod nodeorder;
pub mod overcommit;
pub mod pdb;
pub mod predicates;
pub mod priority;
pub mod proportion;
pub mod resourcequota;
pub mod sla;
pub mod tasktopology;

/// Builds the named plugin with its arguments; `None` for a name this build does not know
/// (the configuration check refuses those before a session starts).
pub fn build(option: &PluginOption) -> Option<Box<dyn Plugin>> {
    Some(match option.name.as_str() {
        "priority" => Box::new(priority::Priority),
        "gang" => Box::new(gang::Gang),
        "conformance" => Box::new(conformance::Conformance),
        "overcommit" => Box::new(overcommit::Overcommit::new(option)),
        "drf" => Box::new(drf::Drf::default()),
        "proportion" => Box::new(proportion::Proportion::default()),
        "capacity" => Box::new(proportion::Proportion::capacity(option)),
        "predicates" => Box::new(predicates::Predicates::default()),
        "nodeorder" => Box::new(nodeorder::NodeOrder::new(option)),
        "binpack" => Box::new(binpack::Binpack::new(option)),
        "sla" => Box::new(sla::Sla::new(option)),
        "nodegroup" => Box::new(nodegroup::NodeGroup::new(option)),
        "resourcequota" => Box::new(resourcequota::ResourceQuota),
        "pdb" => Box::new(pdb::Pdb::default()),
        "task-topology" => Box::new(tasktopology::TaskTopology::new(option)),
        _ => return None,
    })
}
