//! What each API key stores, and its cap: the bytes of its executions
//! (the record of a paused one, the outcome of an ended one) and of its
//! session files, counted as they are written and deleted, rebuilt from the
//! store when the server starts.
//!
//! A request is admitted when the key's bytes plus what the request brings
//! stay within the cap. A pause then holds its record's size before it is
//! written ([`KeyUsage::hold`]), so pauses at once cannot together pass the
//! cap; an ended execution's outcome and files are counted as written, so
//! a key can pass its cap by what one round of each admitted request
//! leaves (its output and files); the next request then waits. An upload
//! is checked as its bytes arrive, and what it has received is counted
//! (held) until it ends, so uploads at once cannot together pass the cap.
//!
//! Invariants:
//! - An item (an execution or a file) is counted once, at its latest size,
//!   for the key that owns it; removing it removes exactly its bytes.
//! - The counts live in this process: one server per store (a second
//!   server on the same store counts only what it wrote since it started).

use std::collections::HashMap;
use std::sync::Mutex;

/// Something a key stores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Item {
    /// An execution's record or outcome, by execution id.
    Execution([u8; 16]),
    /// A session file, by its store key.
    File(Vec<u8>),
    /// What an upload under way has received so far, by a random id.
    Upload([u8; 16]),
    /// A Python session's cells' journals, by session id.
    Session([u8; 16]),
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    owner: [u8; 8],
    bytes: u64,
    /// Unix seconds after which the sweeper deletes it.
    expires_at: u64,
}

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The key is at its cap; something it stores expires in this many
    /// seconds.
    Full {
        /// Seconds until the key's first item expires.
        retry_after: u64,
        /// Bytes the key stores.
        stored: u64,
        /// The cap.
        cap: u64,
    },
    /// The request alone is over the cap: it can never be admitted.
    TooLarge {
        /// Bytes the request brings.
        incoming: u64,
        /// The cap.
        cap: u64,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MIB: f64 = 1048576.0;
        match self {
            Refusal::Full {
                retry_after,
                stored,
                cap,
            } => write!(
                f,
                "This API key stores {:.1} MiB of paused executions, results and session files, at its limit of {:.1} MiB (--max-key-storage-mb); retry in {retry_after} s, when some of it expires, or end paused executions",
                *stored as f64 / MIB,
                *cap as f64 / MIB
            ),
            Refusal::TooLarge { incoming, cap } => write!(
                f,
                "This request brings {:.1} MiB, over the per-key storage limit of {:.1} MiB (--max-key-storage-mb)",
                *incoming as f64 / MIB,
                *cap as f64 / MIB
            ),
        }
    }
}

/// The bytes every key stores.
pub struct KeyUsage {
    cap: u64,
    items: Mutex<HashMap<Item, Entry>>,
    totals: Mutex<HashMap<[u8; 8], u64>>,
}

impl KeyUsage {
    /// Usage with a cap of `cap` bytes per key.
    pub fn new(cap: u64) -> KeyUsage {
        KeyUsage {
            cap,
            items: Mutex::new(HashMap::new()),
            totals: Mutex::new(HashMap::new()),
        }
    }

    /// Sets what `item` takes (replacing what it took before).
    pub fn set(&self, item: Item, owner: [u8; 8], bytes: u64, expires_at: u64) {
        let (Ok(mut items), Ok(mut totals)) = (self.items.lock(), self.totals.lock()) else {
            return;
        };
        let entry = Entry {
            owner,
            bytes,
            expires_at,
        };
        insert(&mut items, &mut totals, item, entry);
    }

    /// Sets what `item` takes to `bytes` only if `owner` stays within the
    /// cap with it at that size (what it took before counts as free): how
    /// an upload under way holds what it has received. Otherwise changes
    /// nothing and says why.
    pub fn hold(
        &self,
        item: Item,
        owner: [u8; 8],
        bytes: u64,
        expires_at: u64,
        now: u64,
    ) -> Result<(), Refusal> {
        self.within_cap(bytes)?;
        let (Ok(mut items), Ok(mut totals)) = (self.items.lock(), self.totals.lock()) else {
            return Ok(());
        };
        let held = items.get(&item).map_or(0, |e| e.bytes);
        let stored = totals.get(&owner).copied().unwrap_or(0);
        if stored.saturating_sub(held).saturating_add(bytes) > self.cap {
            return Err(self.full(Some(&items), owner, stored, now));
        }
        let entry = Entry {
            owner,
            bytes,
            expires_at,
        };
        insert(&mut items, &mut totals, item, entry);
        Ok(())
    }

    /// Takes `counted`'s items and totals in place of these (a recount).
    pub fn replace_with(&self, counted: KeyUsage) {
        let (Ok(mut items), Ok(mut totals)) = (self.items.lock(), self.totals.lock()) else {
            return;
        };
        *items = counted.items.into_inner().unwrap_or_default();
        *totals = counted.totals.into_inner().unwrap_or_default();
    }

    /// Forgets `item` (it was deleted).
    pub fn remove(&self, item: &Item) {
        let (Ok(mut items), Ok(mut totals)) = (self.items.lock(), self.totals.lock()) else {
            return;
        };
        if let Some(old) = items.remove(item) {
            subtract(&mut totals, old);
        }
    }

    /// The bytes `owner` stores.
    pub fn stored(&self, owner: [u8; 8]) -> u64 {
        self.totals
            .lock()
            .map(|t| t.get(&owner).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    /// Whether `owner` may store `incoming` more bytes now (`now` in unix
    /// seconds, for the retry delay).
    pub fn admit(&self, owner: [u8; 8], incoming: u64, now: u64) -> Result<(), Refusal> {
        self.within_cap(incoming)?;
        let stored = self.stored(owner);
        if stored.saturating_add(incoming) <= self.cap {
            return Ok(());
        }
        let items = self.items.lock().ok();
        Err(self.full(items.as_deref(), owner, stored, now))
    }

    /// Refuses what no key could ever store.
    fn within_cap(&self, incoming: u64) -> Result<(), Refusal> {
        if incoming > self.cap {
            return Err(Refusal::TooLarge {
                incoming,
                cap: self.cap,
            });
        }
        Ok(())
    }

    /// The refusal of a key at its cap: retry when its first item expires.
    fn full(
        &self,
        items: Option<&HashMap<Item, Entry>>,
        owner: [u8; 8],
        stored: u64,
        now: u64,
    ) -> Refusal {
        let first_expiry = items.and_then(|items| {
            items
                .values()
                .filter(|e| e.owner == owner)
                .map(|e| e.expires_at)
                .min()
        });
        Refusal::Full {
            retry_after: first_expiry.map_or(60, |at| at.saturating_sub(now).max(1)),
            stored,
            cap: self.cap,
        }
    }
}

/// Counts `entry` for `item`, in place of what it counted before.
fn insert(
    items: &mut HashMap<Item, Entry>,
    totals: &mut HashMap<[u8; 8], u64>,
    item: Item,
    entry: Entry,
) {
    if let Some(old) = items.insert(item, entry) {
        subtract(totals, old);
    }
    *totals.entry(entry.owner).or_default() += entry.bytes;
}

fn subtract(totals: &mut HashMap<[u8; 8], u64>, old: Entry) {
    if let Some(total) = totals.get_mut(&old.owner) {
        *total = total.saturating_sub(old.bytes);
        if *total == 0 {
            totals.remove(&old.owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_count_once_at_their_latest_size_and_per_owner() {
        let usage = KeyUsage::new(100);
        let (a, b) = ([1; 8], [2; 8]);
        usage.set(Item::Execution([1; 16]), a, 30, 1000);
        usage.set(Item::Execution([1; 16]), a, 50, 1000);
        usage.set(Item::File(b"f/1".to_vec()), a, 20, 500);
        usage.set(Item::File(b"f/2".to_vec()), b, 90, 500);
        assert_eq!((usage.stored(a), usage.stored(b)), (70, 90));
        assert_eq!(usage.admit(a, 30, 400), Ok(()));
        assert_eq!(
            usage.admit(a, 31, 400),
            Err(Refusal::Full {
                retry_after: 100,
                stored: 70,
                cap: 100
            })
        );
        assert_eq!(
            usage.admit(b, 101, 400),
            Err(Refusal::TooLarge {
                incoming: 101,
                cap: 100
            })
        );
        usage.remove(&Item::Execution([1; 16]));
        usage.remove(&Item::Execution([1; 16]));
        assert_eq!(usage.stored(a), 20);
        assert_eq!(usage.admit(a, 80, 400), Ok(()));
    }

    #[test]
    fn an_upload_holds_what_it_received_and_no_more_than_the_cap() {
        let usage = KeyUsage::new(100);
        let (a, upload) = ([1; 8], Item::Upload([7; 16]));
        usage.set(Item::File(b"f/1".to_vec()), a, 20, 500);
        assert_eq!(usage.hold(upload.clone(), a, 50, 450, 400), Ok(()));
        assert_eq!(usage.stored(a), 70);
        assert_eq!(
            usage.hold(upload.clone(), a, 80, 450, 400),
            Ok(()),
            "what it held is its own"
        );
        assert_eq!(usage.stored(a), 100);
        assert_eq!(
            usage.admit(a, 1, 400),
            Err(Refusal::Full {
                retry_after: 50,
                stored: 100,
                cap: 100
            }),
            "another request sees the upload"
        );
        assert_eq!(
            usage.hold(upload.clone(), a, 81, 450, 400),
            Err(Refusal::Full {
                retry_after: 50,
                stored: 100,
                cap: 100
            })
        );
        assert_eq!(usage.stored(a), 100, "a refused hold changes nothing");
        assert_eq!(
            usage.hold(Item::Upload([8; 16]), a, 101, 450, 400),
            Err(Refusal::TooLarge {
                incoming: 101,
                cap: 100
            })
        );
        usage.remove(&upload);
        assert_eq!(usage.stored(a), 20);
    }
}
