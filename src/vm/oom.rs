//! Out-of-memory reporting for children.
//!
//! Memory that grows step by step under `RLIMIT_AS` ends in an allocation
//! failure that aborts the process, so no Python exception can report it.
//! The global allocator of the binary wraps the system allocator: when an
//! allocation fails in a child that armed this module, it writes a
//! pre-encoded [`FromChild::OutOfMemory`] frame to the child's socket (with a
//! raw `write`, which allocates nothing) before failing as usual.
//!
//! Invariant: nothing here allocates on the failure path.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use crate::sandbox::protocol::{FromChild, encode_frame};

static SOCKET: AtomicI32 = AtomicI32::new(-1);
static REPORTED: AtomicBool = AtomicBool::new(false);
static mut FRAME: [u8; 16] = [0; 16];
static mut FRAME_LEN: usize = 0;

/// The allocator of the whole binary.
pub struct ReportingAllocator;

// SAFETY: every method defers to the system allocator; the failure path only
// reads statics written before `SOCKET` was published.
unsafe impl GlobalAlloc for ReportingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let ptr = unsafe { System.alloc(layout) };
        if ptr.is_null() {
            report();
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if ptr.is_null() {
            report();
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: same contract as the caller's.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if new.is_null() {
            report();
        }
        new
    }
}

/// Arms the report for this (child) process, writing to `fd`.
pub fn arm(fd: i32) {
    let Ok(frame) = encode_frame(&FromChild::OutOfMemory) else {
        return;
    };
    if frame.len() > 16 {
        return;
    }
    // SAFETY: single-threaded at this point (the watchdog starts later);
    // the statics are written once before SOCKET publishes them.
    unsafe {
        let target = &mut *std::ptr::addr_of_mut!(FRAME);
        target[..frame.len()].copy_from_slice(&frame);
        FRAME_LEN = frame.len();
    }
    SOCKET.store(fd, Ordering::Release);
}

fn report() {
    let fd = SOCKET.load(Ordering::Acquire);
    if fd < 0 || REPORTED.swap(true, Ordering::AcqRel) {
        return;
    }
    // SAFETY: FRAME/FRAME_LEN were written before SOCKET was published.
    unsafe {
        let frame = &*std::ptr::addr_of!(FRAME);
        libc::write(fd, frame.as_ptr().cast(), FRAME_LEN);
    }
}
