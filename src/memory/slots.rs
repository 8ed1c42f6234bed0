//! The host's side-call slots: at most N side calls run at once on a host,
//! whichever process runs them (detached workers, `jobs run`, a
//! `--wait-side` turn, `facts enrich`).
//!
//! A slot is an advisory lock (`flock`) on one of N files in a runtime
//! folder. The kernel drops it when its holder exits, however it exits, so
//! a worker killed with -9 frees its slot at once; nothing needs cleaning.

use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::store::lock;

/// The default bound: two side calls at once per host
/// (`--side-concurrency`).
pub(crate) const DEFAULT_CONCURRENCY: u16 = 2;
/// The most `--side-concurrency` accepts.
pub(crate) const MAX_CONCURRENCY: u16 = 64;

/// The host's slots, of which a process may take up to `limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SideSlots {
    dir: PathBuf,
    limit: usize,
}

/// One slot, held until dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    _file: File,
    pub index: usize,
}

impl SideSlots {
    pub(crate) fn new(dir: PathBuf, limit: usize) -> SideSlots {
        SideSlots {
            dir,
            limit: limit.clamp(1, usize::from(MAX_CONCURRENCY)),
        }
    }

    /// The host's slots for this user: in `$XDG_RUNTIME_DIR/duduclaw-session`
    /// (a tmpfs the session manager keeps per user), else beside the
    /// default store, else in the temp folder.
    pub(crate) fn for_host(limit: usize) -> SideSlots {
        let dir = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_dir())
            .map(|p| p.join("duduclaw-session"))
            .or_else(|| {
                crate::store::default_path()
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf))
            })
            .unwrap_or_else(|| {
                let uid = rustix::process::getuid().as_raw();
                std::env::temp_dir().join(format!("duduclaw-session-{uid}"))
            });
        SideSlots::new(dir.join("side-slots"), limit)
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, index: usize) -> PathBuf {
        self.dir.join(format!("slot-{index}.lock"))
    }

    /// Take a free slot other than those in `held`, if there is one now.
    pub(crate) fn try_take(&self, held: &[Slot]) -> Result<Option<Slot>> {
        for index in 0..self.limit {
            if held.iter().any(|s| s.index == index) {
                continue;
            }
            if let Some(Some(file)) = lock::try_lock(&self.path(index), true)? {
                return Ok(Some(Slot { _file: file, index }));
            }
        }
        Ok(None)
    }

    /// How many of the slots are held now, read from the kernel's lock
    /// table (`/proc/locks`) so that looking takes no slot from a worker;
    /// `None` where there is no such table.
    pub(crate) fn in_use(&self) -> Option<usize> {
        use std::os::unix::fs::MetadataExt;
        let table = std::fs::read_to_string("/proc/locks").ok()?;
        // Each line names a lock's file as MAJOR:MINOR:INODE (devices in hex).
        let held: Vec<(u64, u64, u64)> = table
            .lines()
            .filter(|l| l.contains("FLOCK"))
            .filter_map(|l| {
                let mut id = l.split_whitespace().nth(5)?.split(':');
                let major = u64::from_str_radix(id.next()?, 16).ok()?;
                let minor = u64::from_str_radix(id.next()?, 16).ok()?;
                Some((major, minor, id.next()?.parse().ok()?))
            })
            .collect();
        let count = (0..self.limit)
            .filter_map(|i| std::fs::metadata(self.path(i)).ok())
            .filter(|m| {
                // Linux's encoding of a device number's major and minor parts.
                let dev = m.dev();
                let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
                let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
                held.contains(&(major, minor, m.ino()))
            })
            .count();
        Some(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_most_the_limit_are_taken_and_a_dropped_slot_is_free_again() {
        let dir = tempfile::tempdir().unwrap();
        let slots = SideSlots::new(dir.path().join("slots"), 2);
        let mut held = Vec::new();
        held.push(slots.try_take(&held).unwrap().unwrap());
        held.push(slots.try_take(&held).unwrap().unwrap());
        assert!(slots.try_take(&held).unwrap().is_none(), "both taken");
        // Another holder (another process, as far as flock goes) sees none.
        let other = SideSlots::new(dir.path().join("slots"), 2);
        assert!(other.try_take(&[]).unwrap().is_none());
        assert_eq!(slots.in_use(), Some(2));
        let freed = held.remove(0).index;
        assert_eq!(other.try_take(&[]).unwrap().unwrap().index, freed);
        assert_eq!(SideSlots::new(dir.path().into(), 0).limit(), 1);
        assert_eq!(
            SideSlots::new(dir.path().into(), 1000).limit(),
            usize::from(MAX_CONCURRENCY)
        );
    }
}
