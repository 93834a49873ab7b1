//! The server's side of the process model: the zygote, the pool of
//! pre-forked children, and the typed protocol spoken with a child.
//!
//! Invariant: Python never runs in the server process. The server only holds
//! sockets to children and their pids, and can always kill a child.

pub mod cgroups;
pub mod fdpass;
pub mod isolation;
pub mod limits;
pub mod pool;
pub mod probe;
pub mod protocol;
pub mod seccomp;
pub mod zygote;
