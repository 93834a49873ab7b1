//! CPython's set table, kept beside a set's content so that a set iterates,
//! prints and pops in CPython's order (baton patch, see PATCHES.md).
//!
//! RustPython stores a set's elements in its ordered dict table, so a set
//! iterates in insertion order: `print({3, 1, 2})` gives `{3, 1, 2}` where
//! CPython gives `{1, 2, 3}`. This module is CPython 3.11's open-addressing
//! table (`Objects/setobject.c`): minimum size 8, nine linear probes before
//! perturbation, a resize when the table is three-fifths full, dummies left
//! by deletions, the search finger of `pop`. The set keeps its dict table for
//! lookups; this one only decides the order, so for every value whose hash
//! does not depend on the interpreter's seed (integers, floats, tuples of
//! them, `None`, ...) the order is CPython's.
//!
//! A key whose hash comes from its address (objects without a value hash:
//! tasks, functions, instances of plain classes, `None` in 3.11) has an
//! order that differs from one process to the next, in CPython as here; a
//! replay in another child must see the order the first run saw. So a set
//! holding any such key (`stable` false) iterates in insertion order, which
//! is deterministic, and the table's order applies once it holds none.
//!
//! Invariants: `used` is the number of full slots and equals the set's
//! length; `fill` counts full and dummy slots; `unstable` counts the full
//! slots whose key is not `stable`; the slot count is a power of two and at
//! least 8; at least one slot is empty, so every probe ends.

use crate::{AsObject, PyObjectRef, common::hash::PyHash};

/// `PySet_MINSIZE`.
const MIN_SIZE: usize = 8;
/// `LINEAR_PROBES`.
const LINEAR_PROBES: usize = 9;
/// `PERTURB_SHIFT`.
const PERTURB_SHIFT: u32 = 5;

#[derive(Clone)]
enum Slot {
    Empty,
    Dummy,
    /// A key, its hash, and whether that hash is the same in every process.
    Full(PyHash, PyObjectRef, bool),
}

/// The slots of a CPython set table, with its counters.
#[derive(Clone)]
pub(crate) struct SetOrder {
    slots: Vec<Slot>,
    fill: usize,
    used: usize,
    finger: usize,
    unstable: usize,
}

impl Default for SetOrder {
    fn default() -> Self {
        Self {
            slots: vec![Slot::Empty; MIN_SIZE],
            fill: 0,
            used: 0,
            finger: 0,
            unstable: 0,
        }
    }
}

/// The index sequence of a probe: each start, then its linear probes when
/// they fit, then a perturbed jump (`set_add_entry`, `set_lookkey`).
struct Probe {
    start: usize,
    offset: usize,
    perturb: usize,
    mask: usize,
}

impl Probe {
    fn new(hash: PyHash, mask: usize) -> Self {
        Self {
            start: hash as usize & mask,
            offset: 0,
            perturb: hash as usize,
            mask,
        }
    }
}

impl Iterator for Probe {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let probes = if self.start + LINEAR_PROBES <= self.mask {
            LINEAR_PROBES
        } else {
            0
        };
        if self.offset > probes {
            self.perturb >>= PERTURB_SHIFT;
            self.start = (self
                .start
                .wrapping_mul(5)
                .wrapping_add(1)
                .wrapping_add(self.perturb))
                & self.mask;
            self.offset = 0;
        }
        let index = self.start + self.offset;
        self.offset += 1;
        Some(index)
    }
}

impl SetOrder {
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    pub(crate) fn len(&self) -> usize {
        self.used
    }

    pub(crate) fn fill(&self) -> usize {
        self.fill
    }

    /// Whether every key's hash is the same in every process, so that the
    /// table's order is the set's order.
    pub(crate) fn is_stable(&self) -> bool {
        self.unstable == 0
    }

    /// Whether this table could be copied slot for slot into an empty one of
    /// `other`'s size (`set_merge`'s first fast path).
    fn copies_into(&self, other: &Self) -> bool {
        other.fill == 0 && other.mask() == self.mask() && self.fill == self.used
    }

    /// `set_add_entry` for a key the set did not hold.
    pub(crate) fn insert_new(&mut self, hash: PyHash, key: PyObjectRef, stable: bool) {
        if !stable {
            self.unstable += 1;
        }
        let mut free = None;
        let mask = self.mask();
        for index in Probe::new(hash, mask) {
            match self.slots[index] {
                Slot::Empty => {
                    if let Some(free) = free {
                        self.slots[free] = Slot::Full(hash, key, stable);
                        self.used += 1;
                        return;
                    }
                    self.slots[index] = Slot::Full(hash, key, stable);
                    self.fill += 1;
                    self.used += 1;
                    if self.fill * 5 >= mask * 3 {
                        self.resize(self.growth());
                    }
                    return;
                }
                // The last dummy on the path, as `set_add_entry` keeps it.
                Slot::Dummy => free = Some(index),
                _ => {}
            }
        }
    }

    /// `set_insert_clean`: into a table with no dummies and no equal key.
    fn insert_clean(&mut self, hash: PyHash, key: PyObjectRef, stable: bool) {
        let mask = self.mask();
        for index in Probe::new(hash, mask) {
            if matches!(self.slots[index], Slot::Empty) {
                self.slots[index] = Slot::Full(hash, key, stable);
                return;
            }
        }
    }

    /// The size `set_add_entry` and `set_difference_update` resize to.
    fn growth(&self) -> usize {
        if self.used > 50000 {
            self.used * 2
        } else {
            self.used * 4
        }
    }

    /// `set_table_resize`: the smallest power of two above `min_used`, the
    /// full slots moved over in table order, the dummies dropped.
    fn resize(&mut self, min_used: usize) {
        let mut size = MIN_SIZE;
        while size <= min_used {
            size <<= 1;
        }
        let old = core::mem::replace(&mut self.slots, vec![Slot::Empty; size]);
        self.fill = self.used;
        for slot in old {
            if let Slot::Full(hash, key, stable) = slot {
                self.insert_clean(hash, key, stable);
            }
        }
    }

    /// The resize `set_merge` and `set_update_internal` do before adding
    /// `incoming` keys.
    pub(crate) fn presize(&mut self, incoming: usize) {
        if (self.fill + incoming) * 5 >= self.mask() * 3 {
            self.resize((self.used + incoming) * 2);
        }
    }

    /// `set_merge` into an empty table: slot for slot when the sizes match
    /// and `other` has no dummies, else each key cleanly in `other`'s order.
    /// The caller has presized and checked that this table is empty.
    pub(crate) fn fill_from(&mut self, other: &Self) {
        if other.copies_into(self) {
            self.slots.clone_from(&other.slots);
            self.fill = other.fill;
            self.used = other.used;
            self.unstable = other.unstable;
            return;
        }
        if other.used * 5 >= self.mask() * 3 {
            // Not presized (never so from `merge`): room first, so that
            // every key finds an empty slot.
            self.resize(other.used * 2);
        }
        self.fill = other.used;
        self.used = other.used;
        self.unstable = other.unstable;
        for slot in &other.slots {
            if let Slot::Full(hash, key, stable) = slot {
                self.insert_clean(*hash, key.clone(), *stable);
            }
        }
    }

    /// The keys with this hash on this hash's probe path, before its first
    /// empty slot, with their slots: where `set_lookkey` compares.
    pub(crate) fn candidates(&self, hash: PyHash) -> Vec<(usize, PyObjectRef)> {
        Probe::new(hash, self.mask())
            .take_while(|&index| !matches!(self.slots[index], Slot::Empty))
            .filter_map(|index| match &self.slots[index] {
                Slot::Full(slot_hash, key, _) if *slot_hash == hash => Some((index, key.clone())),
                _ => None,
            })
            .collect()
    }

    /// Removes this very key object, wherever its probe path put it.
    pub(crate) fn remove_identical(&mut self, hash: PyHash, key: &PyObjectRef) {
        let found = self
            .candidates(hash)
            .into_iter()
            .find(|(_, candidate)| candidate.is(key));
        if let Some((index, _)) = found {
            self.take(index);
        }
    }

    /// `set_discard_entry` once the slot is known: a dummy in its place,
    /// if the slot still holds `key` (the slot was found before an
    /// `__eq__` ran, which may have changed the table since). Whether it
    /// did.
    pub(crate) fn take_key_at(&mut self, index: usize, key: &PyObjectRef) -> bool {
        match self.slots.get(index) {
            Some(Slot::Full(_, held, _)) if held.is(key) => self.take(index).is_some(),
            _ => false,
        }
    }

    fn take(&mut self, index: usize) -> Option<(PyHash, PyObjectRef)> {
        match core::mem::replace(&mut self.slots[index], Slot::Dummy) {
            Slot::Full(hash, key, stable) => {
                self.used -= 1;
                if !stable {
                    self.unstable -= 1;
                }
                Some((hash, key))
            }
            other => {
                self.slots[index] = other;
                None
            }
        }
    }

    /// `set_pop`: the first full slot from the search finger on.
    pub(crate) fn pop(&mut self) -> Option<(PyHash, PyObjectRef)> {
        if self.used == 0 {
            return None;
        }
        let mask = self.mask();
        let mut index = self.finger & mask;
        while !matches!(self.slots[index], Slot::Full(..)) {
            index = (index + 1) & mask;
        }
        self.finger = index + 1;
        self.take(index)
    }

    /// `set_swap_bodies`: another table's slots and counters, this one's
    /// search finger.
    pub(crate) fn take_layout(&mut self, other: Self) {
        let finger = self.finger;
        *self = other;
        self.finger = finger;
    }

    /// `set_clear_internal`: back to the minimum size (the finger stays).
    pub(crate) fn clear(&mut self) {
        self.slots = vec![Slot::Empty; MIN_SIZE];
        self.fill = 0;
        self.used = 0;
        self.unstable = 0;
    }

    /// After `difference_update`: a table more than a quarter dummies is
    /// rebuilt.
    pub(crate) fn shed_dummies(&mut self) {
        if self.fill - self.used > self.mask() / 4 {
            self.resize(self.growth());
        }
    }

    /// The keys with their hashes, in table order.
    pub(crate) fn entries(&self) -> Vec<(PyObjectRef, PyHash)> {
        self.slots
            .iter()
            .filter_map(|slot| match slot {
                Slot::Full(hash, key, _) => Some((key.clone(), *hash)),
                _ => None,
            })
            .collect()
    }

    /// The first key at or after slot `position`, with the slot after it.
    pub(crate) fn next_from(&self, position: usize) -> Option<(usize, PyObjectRef)> {
        self.slots
            .iter()
            .enumerate()
            .skip(position)
            .find_map(|(index, slot)| match slot {
                Slot::Full(_, key, _) => Some((index + 1, key.clone())),
                _ => None,
            })
    }

    /// The keys held, for the collector.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &PyObjectRef> {
        self.slots.iter().filter_map(|slot| match slot {
            Slot::Full(_, key, _) => Some(key),
            _ => None,
        })
    }
}
