//! The zygote's memory in huge pages, so that forking a child and ending it
//! cost less.
//!
//! A fork copies the page tables of every anonymous page the zygote has
//! (about 46 MB of a warm interpreter: 12,000 entries), and the child's
//! exit tears them down again; under load that was a quarter of both
//! cores. Backed by 2 MiB pages, the same memory is 23 table entries to
//! copy. A child's first write to such a page splits the mapping and
//! copies only the 4 KiB it writes (the kernel's copy-on-write of a shared
//! huge page), so a child's private memory does not grow.
//!
//! Invariants:
//! - Only the zygote's private, writable, anonymous mappings are advised
//!   (`MADV_HUGEPAGE`) and collapsed (`MADV_COLLAPSE`); a kernel that
//!   refuses either leaves the memory as it was.
//! - A child never gets huge pages of its own (`PR_SET_THP_DISABLE`):
//!   neither a fault nor `khugepaged` may turn its few written pages into
//!   2 MiB private copies, which would break the parked child's budget.

/// `MADV_COLLAPSE` (Linux 6.1), not in every libc crate version.
const MADV_COLLAPSE: libc::c_int = 25;

/// The address ranges of the zygote's private writable anonymous mappings.
fn anonymous_ranges(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let range = fields.next()?;
            let perms = fields.next()?;
            let path = fields.nth(3);
            if perms != "rw-p" || path.is_some_and(|p| p != "[heap]") {
                return None;
            }
            let (start, end) = range.split_once('-')?;
            let start = usize::from_str_radix(start, 16).ok()?;
            let end = usize::from_str_radix(end, 16).ok()?;
            (end - start >= 2 << 20).then_some((start, end))
        })
        .collect()
}

/// Advises and collapses the zygote's anonymous memory into huge pages.
pub(super) fn back_the_zygote() {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return;
    };
    for (start, end) in anonymous_ranges(&maps) {
        // SAFETY: advice on mappings of this process, whole pages; neither
        // changes their contents.
        unsafe {
            let address = start as *mut libc::c_void;
            if libc::madvise(address, end - start, libc::MADV_HUGEPAGE) == 0 {
                libc::madvise(address, end - start, MADV_COLLAPSE);
            }
        }
    }
}

/// No huge pages of its own for a child (see the module doc).
pub(super) fn keep_the_child_small() {
    // SAFETY: a prctl on this process only.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_private_writable_anonymous_mappings_of_2_mib_or_more() {
        let maps = "\
55d0c0000000-55d0c0400000 rw-p 00000000 00:00 0 [heap]
7f0000000000-7f0000400000 rw-p 00000000 00:00 0 
7f0000400000-7f0000600000 r--p 00000000 fd:01 12 /usr/lib/libc.so.6
7f0000600000-7f0000a00000 rw-p 00000000 fd:01 12 /usr/lib/libc.so.6
7f0000a00000-7f0000a01000 rw-p 00000000 00:00 0 
7f0000b00000-7f0000f00000 rw-s 00000000 00:01 3 /dev/zero (deleted)
7ffc00000000-7ffc00400000 rw-p 00000000 00:00 0 [stack]
";
        assert_eq!(
            anonymous_ranges(maps),
            vec![
                (0x55d0c0000000, 0x55d0c0400000),
                (0x7f0000000000, 0x7f0000400000)
            ]
        );
    }
}
