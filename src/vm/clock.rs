//! The execution's virtual clock and entropy stream: what `time`,
//! `datetime`, `random`, `uuid` and `os.urandom` see inside a child.
//!
//! Invariants:
//! - The clock is a pure function of its base and the reads and sleeps made
//!   since; a resumed clock never goes back.
//! - The entropy stream is a pure function of the execution's seed: block
//!   `n` is `SHA-256(seed || n)`.

use sha2::{Digest, Sha256};

use crate::journal::ClockBase;

/// The virtual clock: deterministic, advanced by reads and sleeps.
#[derive(Clone, Copy)]
pub struct Clock {
    base: ClockBase,
    reads: u64,
    slept: f64,
}

impl Clock {
    /// A clock starting at `base`.
    pub fn new(base: ClockBase) -> Self {
        Clock {
            base,
            reads: 0,
            slept: 0.0,
        }
    }

    /// Reads wall (`kind == 0`) or monotonic time; every read advances 1 µs.
    pub fn read(&mut self, kind: i32) -> f64 {
        self.reads += 1;
        let base = if kind == 0 {
            self.base.wall
        } else {
            self.base.mono
        };
        base + self.reads as f64 * 1e-6 + self.slept
    }

    /// Moves the clock forward by a sleep.
    pub fn advance(&mut self, secs: f64) {
        self.slept += secs;
    }

    /// The clock after a pause: from `base`, but never behind what the code
    /// has already seen (a sleep before the pause may have carried the
    /// virtual time past the server's base).
    pub fn resumed(&self, base: ClockBase) -> Self {
        let seen = |start: f64| start + self.reads as f64 * 1e-6 + self.slept;
        Clock::new(ClockBase {
            wall: base.wall.max(seen(self.base.wall)),
            mono: base.mono.max(seen(self.base.mono)),
        })
    }
}

/// The execution's entropy: SHA-256 of (seed, block counter), in order.
pub struct Entropy {
    seed: [u8; 32],
    counter: u64,
    pending: Vec<u8>,
}

impl Entropy {
    /// The stream of `seed`.
    pub fn new(seed: [u8; 32]) -> Self {
        Entropy {
            seed,
            counter: 0,
            pending: Vec::new(),
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            if self.pending.is_empty() {
                let mut hasher = Sha256::new();
                hasher.update(self.seed);
                hasher.update(self.counter.to_le_bytes());
                self.counter += 1;
                self.pending = hasher.finalize().to_vec();
                self.pending.reverse();
            }
            let want = n - out.len();
            let take = want.min(self.pending.len());
            for _ in 0..take {
                if let Some(byte) = self.pending.pop() {
                    out.push(byte);
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_never_moves_the_clock_back() {
        let mut clock = Clock::new(ClockBase {
            wall: 100.0,
            mono: 10.0,
        });
        clock.advance(5.0);
        let before = clock.read(1);
        let mut resumed = clock.resumed(ClockBase {
            wall: 102.5,
            mono: 12.5,
        });
        assert!(resumed.read(1) > before);
        let mut later = clock.resumed(ClockBase {
            wall: 200.0,
            mono: 50.0,
        });
        assert_eq!(later.read(0), 200.0 + 1e-6);
    }

    #[test]
    fn entropy_is_a_pure_function_of_the_seed() {
        let mut a = Entropy::new([3; 32]);
        let mut b = Entropy::new([3; 32]);
        let mut c = Entropy::new([4; 32]);
        let first = a.take(5);
        let rest = a.take(40);
        let whole = b.take(45);
        assert_eq!([first, rest].concat(), whole);
        assert_ne!(whole, c.take(45));
        let mut hasher = Sha256::new();
        hasher.update([3u8; 32]);
        hasher.update(0u64.to_le_bytes());
        assert_eq!(whole[..32], hasher.finalize()[..]);
    }

    #[test]
    fn clock_advances_by_reads_and_sleeps() {
        let mut clock = Clock::new(ClockBase {
            wall: 100.0,
            mono: 5.0,
        });
        assert_eq!(clock.read(0), 100.000001);
        clock.advance(2.0);
        assert!((clock.read(1) - 7.000002).abs() < 1e-9);
    }
}
