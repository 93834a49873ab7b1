//! What a Rust panic does inside the sandbox processes (the zygote and its
//! children).
//!
//! The interpreter is RustPython, and some inputs make it panic (a bug of
//! its, not a Python exception). Left to Rust's default, a panic on the
//! interpreter's thread ends that thread only: the child's watchdog thread
//! keeps the process and its socket alive, so the server would wait for the
//! whole time budget and then report a time-out. Here:
//!
//! - An uncaught panic ends the whole process at once (`_exit`), after one
//!   line on stderr (the zygote's is the server's; a child's is
//!   `/dev/null`); the server sees the child's socket close, logs it and
//!   answers `Execution crashed`.
//! - [`catch`] runs a closure with panics caught, for the few places where
//!   the runtime knows a better answer than a crash (see
//!   `_baton.compile` in [`crate::vm::bridge`]).
//!
//! Invariant: the hook is installed once, in the zygote, before the
//! interpreter thread starts; every child inherits it through the fork.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};

use crate::vm::exit;

/// The exit status of a sandbox process that panicked (as Rust's own).
const PANIC_EXIT: i32 = 101;

/// The longest panic message written to stderr, in characters.
const MESSAGE_CHARS: usize = 300;

thread_local! {
    /// Whether this thread is inside [`catch`].
    static CATCHING: Cell<bool> = const { Cell::new(false) };
}

/// Makes every uncaught panic end the process.
pub fn install_hook() {
    panic::set_hook(Box::new(|info| {
        if CATCHING.with(Cell::get) {
            return;
        }
        // The message may quote user source: one escaped, bounded line.
        let message: String = info
            .to_string()
            .escape_debug()
            .take(MESSAGE_CHARS)
            .collect();
        eprintln!("baton sandbox: interpreter panic, process ends: {message}");
        exit::exit_with(PANIC_EXIT)
    }));
}

/// Runs `f`; a panic inside it comes back as its message instead of
/// unwinding further.
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    let outer = CATCHING.with(|c| c.replace(true));
    let outcome = panic::catch_unwind(AssertUnwindSafe(f));
    CATCHING.with(|c| c.set(outer));
    outcome.map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catch_returns_the_value_or_the_panic_message() {
        assert_eq!(catch(|| 7), Ok(7));
        assert_eq!(
            catch(|| -> u8 { panic!("bad byte {}", 3) }),
            Err("bad byte 3".to_owned())
        );
        assert_eq!(
            catch(|| -> u8 { std::panic::panic_any("static") }),
            Err("static".to_owned())
        );
        assert!(!CATCHING.with(Cell::get));
    }
}
