//! The writable layers of an isolated sandbox and the ids its files are owned by.
//!
//! A sandbox sees the host's root read-only. On top of it:
//! * the private dirs (`/root /work /workspace /tmp /home /var/tmp`) are the sandbox's own
//!   directories, empty at create;
//! * `/etc`, `/usr/local` and `/opt` are overlays: the host's content below, the sandbox's
//!   own upper layer on top, so installing software changes only that sandbox.
//!
//! Sandbox uid/gid 0..65535 are host ids `SANDBOX_ID_BASE + n`: the sandbox's root owns its
//! own files and nothing of the host's. The lower layer of `/etc` is a copy of the host's
//! `/etc` made once per emulator, owned by the sandbox's ids (so the sandbox's root can edit
//! any file in place) and without what only the host's root may read: `shadow` and
//! `gshadow` become every account locked, other such files are left out. `/usr/local` and
//! `/opt` show the host's files as they are (owned by host ids the sandbox does not map);
//! a skeleton of their directories owned by the sandbox's root lies between, so the
//! sandbox can add, replace and remove files anywhere in them. A host file there can be
//! replaced, not edited in place.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Host uid (and gid) of the sandbox's uid 0; sandbox id `n` is host id `SANDBOX_ID_BASE + n`.
pub const SANDBOX_ID_BASE: u32 = 1_073_741_824;
/// How many ids a sandbox maps.
pub const SANDBOX_ID_COUNT: u32 = 65_536;

/// Overlay layers: (guest path, directory name under `<sandbox>/.layers/`).
pub const LAYERS: &[(&str, &str)] = &[
    ("/etc", "etc"),
    ("/usr/local", "usr-local"),
    ("/opt", "opt"),
];

/// Host id of a host-owned file shown in the `/etc` copy: host id `n` → sandbox id `n`.
fn mapped(host_id: u32) -> u32 {
    if host_id < SANDBOX_ID_COUNT {
        SANDBOX_ID_BASE + host_id
    } else {
        SANDBOX_ID_BASE + 65_534
    }
}

fn lchown(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))
}

/// Makes `path` owned by the sandbox's root.
pub fn own(path: &Path) -> io::Result<()> {
    lchown(path, SANDBOX_ID_BASE, SANDBOX_ID_BASE)
}

/// The emulator-wide lower layers under `<state>/.layers-base/`, rebuilt at every start.
#[derive(Debug, Clone)]
pub struct BaseLayers {
    root: PathBuf,
}

impl BaseLayers {
    pub fn build(state_dir: &Path) -> io::Result<BaseLayers> {
        let root = state_dir.join(".layers-base");
        if root.exists() {
            fs::remove_dir_all(&root)?;
        }
        fs::create_dir_all(&root)?;
        fs::set_permissions(&root, fs::Permissions::from_mode(0o700))?;
        let base = BaseLayers { root };
        for (guest, name) in LAYERS {
            let host = Path::new(guest);
            let target = base.lower(name);
            if *name == "etc" {
                copy_readable(host, &target)?;
                write_locked_shadows(host, &target)?;
            } else {
                skeleton(host, &target)?;
            }
        }
        Ok(base)
    }

    /// The emulator's lower layer for layer `name` (above the host's directory).
    pub fn lower(&self, name: &str) -> PathBuf {
        self.root.join(name)
    }

    /// `lowerdir=` of layer `(guest, name)`: the copy alone for `/etc`, the skeleton over
    /// the host's directory otherwise.
    pub fn lowerdir(&self, guest: &str, name: &str) -> String {
        let lower = self.lower(name);
        if name == "etc" {
            escape(&lower)
        } else {
            format!("{}:{}", escape(&lower), escape(Path::new(guest)))
        }
    }
}

/// Overlay options escape `,` `:` and `\` with a backslash.
fn escape(path: &Path) -> String {
    let mut out = String::new();
    for c in path.to_string_lossy().chars() {
        if matches!(c, ',' | ':' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

fn other_readable(mode: u32) -> bool {
    mode & 0o004 != 0
}

fn other_searchable(mode: u32) -> bool {
    mode & 0o005 == 0o005
}

/// Copies what an unprivileged host user may read of `from` into `to`, owned by the
/// sandbox's ids. Directories the host keeps from other users become empty; files other
/// users cannot read, devices, FIFOs and sockets are left out.
fn copy_readable(from: &Path, to: &Path) -> io::Result<()> {
    let meta = fs::symlink_metadata(from)?;
    fs::create_dir_all(to)?;
    fs::set_permissions(to, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    lchown(to, mapped(meta.uid()), mapped(meta.gid()))?;
    if !other_searchable(meta.mode()) {
        return Ok(());
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let meta = fs::symlink_metadata(&src)?;
        let kind = meta.file_type();
        if kind.is_symlink() {
            std::os::unix::fs::symlink(fs::read_link(&src)?, &dst)?;
        } else if kind.is_dir() {
            copy_readable(&src, &dst)?;
            continue;
        } else if kind.is_file() && other_readable(meta.mode()) {
            fs::copy(&src, &dst)?;
            fs::set_permissions(&dst, fs::Permissions::from_mode(meta.mode() & 0o777))?;
        } else {
            continue;
        }
        lchown(&dst, mapped(meta.uid()), mapped(meta.gid()))?;
    }
    Ok(())
}

/// `shadow` and `gshadow` of the copy: every account of `passwd` / `group`, locked.
fn write_locked_shadows(host: &Path, to: &Path) -> io::Result<()> {
    for (list, shadow, fields) in [
        ("passwd", "shadow", ":*:19000:0:99999:7:::"),
        ("group", "gshadow", ":!::"),
    ] {
        let Ok(text) = fs::read_to_string(to.join(list)) else {
            continue;
        };
        let mut out = String::new();
        for name in text
            .lines()
            .filter_map(|l| l.split(':').next())
            .filter(|n| !n.is_empty())
        {
            out.push_str(name);
            out.push_str(fields);
            out.push('\n');
        }
        let dst = to.join(shadow);
        fs::write(&dst, out)?;
        fs::set_permissions(&dst, fs::Permissions::from_mode(0o640))?;
        let gid = fs::metadata(host.join(shadow))
            .map(|m| m.gid())
            .unwrap_or(0);
        lchown(&dst, SANDBOX_ID_BASE, mapped(gid))?;
    }
    Ok(())
}

/// The directories of `from` that other users may enter, owned by the sandbox's root with
/// the host's modes (so the sandbox can change entries in them).
fn skeleton(from: &Path, to: &Path) -> io::Result<()> {
    fs::create_dir_all(to)?;
    let meta = match fs::symlink_metadata(from) {
        Ok(meta) if meta.is_dir() => meta,
        _ => return own(to),
    };
    fs::set_permissions(to, fs::Permissions::from_mode(meta.mode() & 0o7777))?;
    own(to)?;
    if !other_searchable(meta.mode()) {
        return Ok(());
    }
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            let src = entry.path();
            let meta = fs::symlink_metadata(&src)?;
            if other_searchable(meta.mode()) {
                skeleton(&src, &to.join(entry.file_name()))?;
            }
        }
    }
    Ok(())
}

/// Creates a sandbox's upper and work dirs for every layer (kept if present: a fork
/// copied them) and the mount points the overlays are assembled on.
pub fn create_sandbox_layers(dir: &Path) -> io::Result<()> {
    for (_, name) in LAYERS {
        let layer = dir.join(".layers").join(name);
        for sub in ["upper", "work"] {
            fs::create_dir_all(layer.join(sub))?;
        }
        own(&layer.join("upper"))?;
    }
    fs::set_permissions(dir.join(".layers"), fs::Permissions::from_mode(0o700))?;
    Ok(())
}

/// Options of the overlay of layer `(guest, name)` of the sandbox in `dir`.
pub fn overlay_options(base: &BaseLayers, dir: &Path, guest: &str, name: &str) -> CString {
    let layer = dir.join(".layers").join(name);
    let text = format!(
        "lowerdir={},upperdir={},workdir={}",
        base.lowerdir(guest, name),
        escape(&layer.join("upper")),
        escape(&layer.join("work"))
    );
    CString::new(text).unwrap_or_else(|_| c"lowerdir=/".to_owned())
}

/// `path` as a C string (paths never hold NUL).
pub fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).unwrap_or_else(|_| c"/".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlay_paths_are_escaped() {
        assert_eq!(escape(Path::new("/a,b:c\\d")), "/a\\,b\\:c\\\\d");
        assert_eq!(mapped(0), SANDBOX_ID_BASE);
        assert_eq!(mapped(70_000), SANDBOX_ID_BASE + 65_534);
        assert!(other_searchable(0o755) && !other_searchable(0o750) && !other_readable(0o640));
    }
}
