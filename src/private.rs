//! Folders and sockets that belong to this user alone. A folder under a
//! shared temporary folder (`/tmp`, `$TMPDIR`) may have been made first by
//! another account, open to all, with a listener of theirs on our socket's
//! name or a link where our file will go. So a folder we write into or
//! connect in is checked first, the way tmux checks `/tmp/tmux-<uid>`: a
//! real directory (not a symbolic link), owned by this user, with no
//! permission bits for the group or others. One that fails is never used,
//! never repaired (no chmod, chown or removal of what is not ours): the
//! caller takes its safe way instead and says so.

use std::fmt;
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Why a folder is not ours alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Unsafe {
    /// A symbolic link stands at its name: it could lead anywhere.
    Link,
    /// Something other than a folder stands at its name.
    NotAFolder,
    /// Another account owns it (their uid).
    Owner(u32),
    /// Ours, but the group or others may enter or write it (its mode).
    Open(u32),
    /// It could not be made or looked at.
    Unusable(String),
}

/// A folder refused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal {
    pub path: PathBuf,
    pub why: Unsafe,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.why {
            Unsafe::Link => write!(f, "{path} is a symbolic link, not a folder of this user's"),
            Unsafe::NotAFolder => write!(f, "{path} is not a folder"),
            Unsafe::Owner(uid) => write!(
                f,
                "{path} belongs to {}, not to this user ({})",
                account(*uid),
                account(me())
            ),
            Unsafe::Open(mode) => write!(
                f,
                "{path} is open to other users (mode {mode:04o}; it must be 0700)"
            ),
            Unsafe::Unusable(e) => write!(f, "{path} could not be used: {e}"),
        }
    }
}

impl std::error::Error for Refusal {}

/// This process's user id.
pub(crate) fn me() -> u32 {
    rustix::process::getuid().as_raw()
}

/// A uid as people read it: `uid 65534 (nobody)` where the name is known.
pub(crate) fn account(uid: u32) -> String {
    match user_name(uid) {
        Some(name) => format!("uid {uid} ({name})"),
        None => format!("uid {uid}"),
    }
}

/// The account's name from `/etc/passwd`, where it has one.
fn user_name(uid: u32) -> Option<String> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        let name = fields.next()?;
        let id: u32 = fields.nth(1)?.parse().ok()?;
        (id == uid).then(|| name.to_string())
    })
}

/// Whether `dir` is a private folder of this user, looked at as it stands
/// (a link is not followed).
pub(crate) fn check(dir: &Path) -> Result<(), Refusal> {
    let refuse = |why| {
        Err(Refusal {
            path: dir.to_path_buf(),
            why,
        })
    };
    let meta = match std::fs::symlink_metadata(dir) {
        Ok(m) => m,
        Err(e) => return refuse(Unsafe::Unusable(e.to_string())),
    };
    if meta.file_type().is_symlink() {
        return refuse(Unsafe::Link);
    }
    if !meta.is_dir() {
        return refuse(Unsafe::NotAFolder);
    }
    if meta.uid() != me() {
        return refuse(Unsafe::Owner(meta.uid()));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        return refuse(Unsafe::Open(mode));
    }
    Ok(())
}

/// Make `dir` (mode 0700, its missing parents too) unless it exists, then
/// [`check`] it. Made here, it is ours; found, it may be anyone's.
pub(crate) fn ensure(dir: &Path) -> Result<(), Refusal> {
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        // A link to a missing folder, or a file, at its name: the check
        // below says which.
        if std::fs::symlink_metadata(dir).is_err() {
            return Err(Refusal {
                path: dir.to_path_buf(),
                why: Unsafe::Unusable(e.to_string()),
            });
        }
    }
    check(dir)
}

/// Whether the process at the other end of a connected Unix socket runs as
/// this user (`SO_PEERCRED`): a listener of another account's is told from
/// ours before a byte is written to it.
pub(crate) fn check_peer(socket: impl AsFd, path: &Path) -> Result<(), String> {
    match rustix::net::sockopt::socket_peercred(socket) {
        Ok(cred) if cred.uid.as_raw() == me() => Ok(()),
        Ok(cred) => Err(format!(
            "the socket {} is served by {}, not by this user",
            path.display(),
            account(cred.uid.as_raw())
        )),
        Err(e) => Err(format!(
            "could not tell who serves the socket {}: {e}",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;

    #[test]
    fn a_folder_made_here_is_private_and_an_open_one_is_refused_untouched() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("a/b");
        ensure(&dir).unwrap();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
        let r = ensure(&dir).unwrap_err();
        assert_eq!(r.why, Unsafe::Open(0o755));
        assert!(r.to_string().contains("mode 0755"), "{r}");
        // Refused, not repaired.
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755);
    }

    #[test]
    fn a_link_or_a_file_is_refused_even_when_it_leads_to_a_private_folder() {
        let top = tempfile::tempdir().unwrap();
        let real = top.path().join("real");
        ensure(&real).unwrap();
        let link = top.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        assert_eq!(ensure(&link).unwrap_err().why, Unsafe::Link);
        let dangling = top.path().join("dangling");
        std::os::unix::fs::symlink(top.path().join("nowhere"), &dangling).unwrap();
        assert_eq!(ensure(&dangling).unwrap_err().why, Unsafe::Link);
        assert!(
            !top.path().join("nowhere").exists(),
            "nothing made behind it"
        );
        let file = top.path().join("file");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(ensure(&file).unwrap_err().why, Unsafe::NotAFolder);
    }

    #[test]
    fn a_peer_of_this_user_passes() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        check_peer(&a, Path::new("pair")).unwrap();
    }

    #[test]
    fn accounts_are_named_where_known() {
        assert!(account(0).starts_with("uid 0"));
        assert_eq!(account(4_000_000_000), "uid 4000000000");
    }
}
