//! The host's side-call slots: at most N side calls run at once on a host,
//! whichever process runs them (detached workers, `jobs run`, a
//! `--wait-side` turn, `facts enrich`).
//!
//! A slot is an advisory lock (`flock`) on one of N files in a runtime
//! folder. The kernel drops it when its holder exits, however it exits, so
//! a worker killed with -9 frees its slot at once; nothing needs cleaning.
//! The folder must be this user's alone ([`crate::private`]): another
//! account holding the locks would stop every side call. Where no folder
//! passes, each process keeps the bound by itself.

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
    /// The folder of the slots' lock files; `None` where no folder of this
    /// user's alone was found (each process keeps the bound by itself).
    dir: Option<PathBuf>,
    limit: usize,
}

/// One slot, held until dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    _file: Option<File>,
    pub index: usize,
}

impl SideSlots {
    pub(crate) fn new(dir: PathBuf, limit: usize) -> SideSlots {
        SideSlots {
            dir: Some(dir),
            limit: limit.clamp(1, usize::from(MAX_CONCURRENCY)),
        }
    }

    /// The host's slots for this user: in `$XDG_RUNTIME_DIR/duduclaw-session`
    /// (a tmpfs the session manager keeps per user), else beside the
    /// default store, else in the temp folder; the first of these that is
    /// this user's alone.
    /// Nothing is made here (a folder not there yet is made, private,
    /// when a slot is first taken).
    pub(crate) fn for_host(limit: usize) -> SideSlots {
        let dir = Self::candidates()
            .into_iter()
            .find(|d| match crate::private::check(d) {
                Ok(()) => true,
                Err(_) if std::fs::symlink_metadata(d).is_err() => true,
                Err(r) => {
                    tracing::info!("{r}: side-call slots are not kept there");
                    false
                }
            });
        SideSlots {
            dir,
            ..SideSlots::new(PathBuf::new(), limit)
        }
    }

    /// Where the host's slots may be, in order of preference.
    pub(crate) fn candidates() -> Vec<PathBuf> {
        let runtime = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute() && p.is_dir())
            .map(|p| p.join("duduclaw-session"));
        let data = crate::store::default_path()
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        let uid = rustix::process::getuid().as_raw();
        let temp = std::env::temp_dir().join(format!("duduclaw-session-{uid}"));
        [runtime, data, Some(temp)]
            .into_iter()
            .flatten()
            .map(|d| d.join("side-slots"))
            .collect()
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The slots' folder, `None` when each process keeps its own bound.
    pub(crate) fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Take a free slot other than those in `held`, if there is one now.
    pub(crate) fn try_take(&self, held: &[Slot]) -> Result<Option<Slot>> {
        for index in 0..self.limit {
            if held.iter().any(|s| s.index == index) {
                continue;
            }
            // Made (or found) private just now: another account may have
            // made it since it was chosen.
            let dir = self
                .dir
                .as_ref()
                .filter(|d| match crate::private::ensure(d) {
                    Ok(()) => true,
                    Err(r) => {
                        tracing::warn!("{r}: this process keeps the side-call bound by itself");
                        false
                    }
                });
            let Some(dir) = dir else {
                return Ok(Some(Slot { _file: None, index }));
            };
            let path = dir.join(format!("slot-{index}.lock"));
            if let Some(Some(file)) = lock::try_lock(&path, true)? {
                return Ok(Some(Slot {
                    _file: Some(file),
                    index,
                }));
            }
        }
        Ok(None)
    }

    /// How many of the slots are held now, read from the kernel's lock
    /// table (`/proc/locks`) so that looking takes no slot from a worker;
    /// `None` where there is no such table.
    pub(crate) fn in_use(&self) -> Option<usize> {
        use std::os::unix::fs::MetadataExt;
        let dir = self.dir.as_ref()?;
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
            .filter_map(|i| std::fs::metadata(dir.join(format!("slot-{i}.lock"))).ok())
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

    #[test]
    fn without_a_private_folder_a_process_keeps_the_bound_by_itself() {
        let slots = SideSlots {
            dir: None,
            limit: 2,
        };
        let first = slots.try_take(&[]).unwrap().unwrap();
        let held = [
            slots
                .try_take(std::slice::from_ref(&first))
                .unwrap()
                .unwrap(),
            first,
        ];
        assert!(slots.try_take(&held).unwrap().is_none());
        assert_eq!(slots.in_use(), None);
    }
}
