//! The C allocator's thresholds for large allocations and for trimming, pinned at
//! startup (glibc).
//!
//! glibc serves an allocation of at least `M_MMAP_THRESHOLD` bytes (128 KiB at first)
//! with its own `mmap`, and gives it back to the kernel when it is freed. But the
//! threshold is dynamic: each time such a block is freed, the threshold rises to the
//! block's size (up to 32 MiB) and the trim threshold to twice that. After the first
//! object-store part (8 MiB) is freed, every later part comes from the heaps of the
//! allocator's arenas (one per thread that allocates, up to 8 per core), which keep
//! what is freed for reuse instead of returning it. A daemon whose live heap peaked at
//! 48 MiB had an RSS of 110–231 MiB that way, up to 2.65× `weir validate`'s estimate.
//!
//! Pinning the mmap threshold at 1 MiB (which turns the dynamic adjustment off) keeps
//! large buffers (parts, row groups, WAL read chunks of 1 MiB) in their own mappings,
//! returned to the kernel when freed, so RSS follows what is live. It also leaves the
//! trim threshold at its 128 KiB default, and giving the heap's top back to the kernel
//! that eagerly cost the pipeline bench 7–8% of its rate (records of a batch freed,
//! then faulted in again); the trim threshold is pinned at 2 MiB, which costs nothing
//! measurable and keeps at most 2 MiB free at the top of each arena's heap. The cost
//! of the mappings is a `mmap`/`munmap` and the page faults of each large buffer: about
//! a millisecond per 8 MiB part, against the tens of milliseconds its upload takes.
//!
//! `MALLOC_MMAP_THRESHOLD_` and `MALLOC_TRIM_THRESHOLD_` in the environment, glibc's
//! own settings, are left in force.

/// The mmap threshold weir pins: 1 MiB.
pub const MMAP_THRESHOLD: usize = 1 << 20;
/// The trim threshold weir pins: 2 MiB.
pub const TRIM_THRESHOLD: usize = 2 << 20;

/// Pins glibc's mmap threshold at [`MMAP_THRESHOLD`] and its trim threshold at
/// [`TRIM_THRESHOLD`], each unless the environment sets it (nothing elsewhere than on
/// glibc).
pub fn pin_thresholds() {
    if std::env::var_os("MALLOC_TRIM_THRESHOLD_").is_none() {
        set(Param::Trim, TRIM_THRESHOLD);
    }
    if std::env::var_os("MALLOC_MMAP_THRESHOLD_").is_none() {
        set(Param::Mmap, MMAP_THRESHOLD);
    }
}

#[derive(Clone, Copy)]
enum Param {
    Mmap,
    Trim,
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn set(param: Param, bytes: usize) -> bool {
    let Ok(value) = libc::c_int::try_from(bytes) else {
        return false;
    };
    let param = match param {
        Param::Mmap => libc::M_MMAP_THRESHOLD,
        Param::Trim => libc::M_TRIM_THRESHOLD,
    };
    // SAFETY: mallopt only sets an allocator parameter; it takes the allocator's own
    // lock and may be called at any time from any thread.
    unsafe { libc::mallopt(param, value) == 1 }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set(_param: Param, _bytes: usize) -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// Bytes in the allocator's own mappings (`mallinfo2().hblkhd`).
    #[allow(unsafe_code)]
    fn mapped() -> usize {
        // SAFETY: mallinfo2 only reads the allocator's statistics.
        unsafe { libc::mallinfo2().hblkhd }
    }

    /// With the threshold dynamic, the second 8 MiB buffer would come from an arena's
    /// heap (the first one's free raised the threshold past 8 MiB), and stay there
    /// after it is freed.
    #[test]
    fn large_buffers_keep_their_own_mappings_after_others_were_freed() {
        assert!(
            set(Param::Mmap, MMAP_THRESHOLD),
            "mallopt refused the threshold"
        );
        for round in 0..3 {
            let before = mapped();
            let buffer = vec![1u8; 8 << 20];
            let during = mapped();
            assert!(
                during >= before + (8 << 20),
                "round {round}: an 8 MiB buffer is not its own mapping ({before} -> {during})"
            );
            drop(std::hint::black_box(buffer));
            assert!(
                mapped() + (8 << 20) <= during,
                "round {round}: a freed 8 MiB buffer was kept"
            );
        }
    }
}
