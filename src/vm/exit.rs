//! How a sandbox process ends: at once, with `_exit`, running no
//! destructor and no interpreter finalization (a child's state is
//! disposable, and finalizers could run user code).

/// Ends the child at once: no destructors, no interpreter finalization.
pub fn exit_now() -> ! {
    exit_with(0)
}

/// Ends the process at once with `status`, like [`exit_now`].
pub fn exit_with(status: i32) -> ! {
    // SAFETY: _exit is async-signal-safe and never returns.
    unsafe { libc::_exit(status) }
}
