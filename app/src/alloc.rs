//! glibc allocator settings, chosen by measurement for the two kinds of long work this
//! binary does. Set before the work's threads start.

/// Streams from the network (sync, and the agent in any process that hosts it): hyper
/// allocates its read buffers (up to a few hundred KiB) afresh as it hands bytes out.
/// By default glibc serves many of them by mmap, or trims the freed heap top back to the
/// system, so every buffer faults in fresh zeroed pages: 150,000–210,000 page faults
/// for a 2 GiB sync. With buffers under 4 MiB kept in the arenas and up to 64 MiB of
/// free heap kept, 70,000–105,000, and about 0.2 s less system time.
pub fn for_streams() {
    // SAFETY: mallopt only adjusts allocator parameters; called from main before any
    // thread starts.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}

/// A mount allocates multi-MiB range buffers on many threads. glibc's default raises
/// its mmap threshold after the first such buffer is freed, so later ones come from
/// per-thread arenas that never shrink: measured, a mount reading 2 GiB grew to 1.1 GiB
/// resident. A fixed threshold sends every large buffer straight back to the system.
pub fn for_mount() {
    // SAFETY: as above; called before the mount's threads start.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 10);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 4);
    }
}
