//! The actions a session runs, in configured order.
