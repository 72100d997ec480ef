//! A Queue's state: Open, Closed, or Closing while PodGroups remain, its status counts, and the
//! hierarchy (children close with their parent).

pub mod state;
