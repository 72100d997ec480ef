//! One module per plugin, each with Volcano's semantics and arguments.

use super::config::PluginOption;
use super::framework::Plugin;

/// Builds the named plugin with its arguments; `None` for a name this build does not know
/// (the configuration check refuses those before a session starts).
pub fn build(option: &PluginOption) -> Option<Box<dyn Plugin>> {
    let _ = option;
    None
}
