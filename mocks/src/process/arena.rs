//! Where retained process output lives: anonymous memory regions the kernel leaves out of
//! forked children (`MADV_DONTFORK`).
//!
//! Every process the emulator starts is a `fork` + `exec` of the emulator itself (the
//! namespace set-up runs between the two). The kernel copies the parent's page tables into the
//! child and tears them down again at `exec`, so that cost grows with everything the emulator
//! holds: with a few hundred MiB of journaled output, starting `true` went from ~7 ms to
//! ~35 ms, nearly all of it in `copy_page_range` and `unmap_page_range`. Output kept in these
//! regions is skipped by both, so a sandbox that produced a lot of output does not make every
//! later process slower.

use std::ptr::NonNull;
use std::sync::Arc;

use bytes::Bytes;

/// Size of one region: room for many chunks (a chunk is at most 64 KiB), few mappings.
const REGION_BYTES: usize = 1 << 20;

/// One anonymous mapping, unmapped when the last chunk cut from it is dropped.
struct Region {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value. Bytes are written only through
// `Arena::copy` before a range is shared, and shared ranges are only read.
unsafe impl Send for Region {}
unsafe impl Sync for Region {}

impl Region {
    /// A fresh mapping of `len` bytes; `None` when the kernel refuses (the caller falls back to
    /// the heap).
    fn map(len: usize) -> Option<Region> {
        // SAFETY: an anonymous private mapping with no address hint; the result is checked.
        let ptr = unsafe {
            nix::libc::mmap(
                std::ptr::null_mut(),
                len,
                nix::libc::PROT_READ | nix::libc::PROT_WRITE,
                nix::libc::MAP_PRIVATE | nix::libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == nix::libc::MAP_FAILED {
            return None;
        }
        let base = NonNull::new(ptr.cast::<u8>())?;
        #[cfg(target_os = "linux")]
        // SAFETY: advice on the mapping made just above. A refusal only loses the speed-up.
        unsafe {
            nix::libc::madvise(ptr, len, nix::libc::MADV_DONTFORK);
        }
        Some(Region { base, len })
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `map`, once, after every slice of it is gone.
        unsafe {
            nix::libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// A filled range of a region, handed to `Bytes` as its owner.
struct Slice {
    region: Arc<Region>,
    start: usize,
    len: usize,
}

impl AsRef<[u8]> for Slice {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `start + len <= region.len` (checked in `Arena::copy`), and the range was
        // fully written before this slice was created and is never written again.
        unsafe { std::slice::from_raw_parts(self.region.base.as_ptr().add(self.start), self.len) }
    }
}

/// Copies output into regions, one after another; a region is reused by no one once full.
#[derive(Default)]
pub struct Arena {
    current: Option<Arc<Region>>,
    /// Bytes of `current` already handed out.
    used: usize,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("used", &self.used)
            .finish_non_exhaustive()
    }
}

impl Arena {
    /// `data` copied into fork-excluded memory (or onto the heap if no region can be mapped).
    pub fn copy(&mut self, data: &[u8]) -> Bytes {
        if data.is_empty() || data.len() > REGION_BYTES {
            return Bytes::copy_from_slice(data);
        }
        let fits = self
            .current
            .as_ref()
            .is_some_and(|r| r.len - self.used >= data.len());
        if !fits {
            match Region::map(REGION_BYTES) {
                Some(region) => {
                    self.current = Some(Arc::new(region));
                    self.used = 0;
                }
                None => return Bytes::copy_from_slice(data),
            }
        }
        let Some(region) = &self.current else {
            return Bytes::copy_from_slice(data);
        };
        let start = self.used;
        debug_assert!(start + data.len() <= region.len);
        // SAFETY: `[start, start + len)` lies inside the mapping (checked above) and has not been
        // handed out yet, so no `Slice` reads it while it is written.
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                region.base.as_ptr().add(start),
                data.len(),
            );
        }
        self.used += data.len();
        Bytes::from_owner(Slice {
            region: Arc::clone(region),
            start,
            len: data.len(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_read_back_and_share_regions() {
        let mut arena = Arena::default();
        let a = arena.copy(b"hello");
        let b = arena.copy(&[7u8; 70_000]);
        assert_eq!(&a[..], b"hello");
        assert_eq!(b.len(), 70_000);
        assert!(b.iter().all(|&x| x == 7));
        // both in one region: the second starts right after the first
        assert_eq!(unsafe { a.as_ptr().add(5) }, b.as_ptr());
    }

    #[test]
    fn a_full_region_is_followed_by_a_new_one_and_old_slices_stay_valid() {
        let mut arena = Arena::default();
        let pieces: Vec<Bytes> = (0..40u8).map(|i| arena.copy(&[i; 64 * 1024])).collect();
        for (i, piece) in pieces.iter().enumerate() {
            assert!(piece.iter().all(|&x| x == i as u8), "piece {i} changed");
        }
        drop(arena);
        // the slices outlive the arena (their regions are reference-counted)
        assert!(pieces[0].iter().all(|&x| x == 0));
    }

    #[test]
    fn empty_and_oversized_copies_still_copy() {
        let mut arena = Arena::default();
        assert!(arena.copy(b"").is_empty());
        let big = arena.copy(&vec![1u8; REGION_BYTES + 1]);
        assert_eq!(big.len(), REGION_BYTES + 1);
        assert!(big.iter().all(|&x| x == 1));
        assert!(arena.current.is_none(), "an oversized copy maps no region");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn regions_are_left_out_of_forked_children() {
        let mut arena = Arena::default();
        let piece = arena.copy(b"kept out of children");
        let start = piece.as_ptr() as usize;
        let maps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        // the mapping that holds the piece carries the `dc` (do not copy) VM flag
        let mut in_region = false;
        let mut flagged = false;
        for line in maps.lines() {
            if let Some((range, _)) = line.split_once(' ') {
                if let Some((lo, hi)) = range.split_once('-') {
                    if let (Ok(lo), Ok(hi)) =
                        (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                    {
                        in_region = lo <= start && start < hi;
                        continue;
                    }
                }
            }
            if in_region && line.starts_with("VmFlags:") {
                flagged = line.split_whitespace().any(|f| f == "dc");
                break;
            }
        }
        assert!(flagged, "the region is not marked MADV_DONTFORK");
    }
}
