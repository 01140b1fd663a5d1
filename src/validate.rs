//! Checks run before anything is sent: a bad id, path, env name or size is refused with a clear
//! [`Error::InvalidInput`] and the server never sees the request.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// Limits the control plane enforces on `envs` (api-reference §9).
pub const MAX_ENVS: usize = 64;
/// Largest value of one env entry.
pub const MAX_ENV_VALUE: usize = 4 * 1024;
/// Largest sum of names and values.
pub const MAX_ENV_TOTAL: usize = 64 * 1024;
/// Auto-pause bounds, seconds.
pub const AUTO_PAUSE_RANGE: std::ops::RangeInclusive<u32> = 60..=86_400;

/// An opaque server id (sandbox, process, network, disk, template, device, window, …): 1–128
/// characters of `[A-Za-z0-9_.:-]`. Ids are never parsed beyond that.
pub fn id(field: &str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.len() > 128 {
        return Err(Error::invalid(
            field,
            format!("{:?}… is longer than 128 characters", &value[..16]),
        ));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':')))
    {
        return Err(Error::invalid(
            field,
            format!("{value:?} contains {c:?}; ids are letters, digits, '_', '-', '.', ':'"),
        ));
    }
    if value == "." || value == ".." {
        return Err(Error::invalid(field, format!("{value:?} is not an id")));
    }
    Ok(())
}

/// An absolute guest path: starts with `/`, no `..` segment, no NUL, at most 4096 bytes.
pub fn guest_path(field: &str, path: &str) -> Result<()> {
    if !path.starts_with('/') {
        return Err(Error::invalid(
            field,
            format!("{path:?} must be an absolute path (start with '/')"),
        ));
    }
    if path.len() > 4096 {
        return Err(Error::invalid(field, "is longer than 4096 bytes"));
    }
    if path.contains('\0') {
        return Err(Error::invalid(field, "contains a NUL byte"));
    }
    if path.split('/').any(|seg| seg == "..") {
        return Err(Error::invalid(
            field,
            format!("{path:?} contains a '..' segment"),
        ));
    }
    Ok(())
}

/// An environment variable name: `^[A-Za-z_][A-Za-z0-9_]*$`.
pub fn env_name(field: &str, name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(field, format!("{name:?} is not a valid variable name (letters, digits, '_', not starting with a digit)")))
    }
}

/// A whole env map against the server's limits.
pub fn envs(field: &str, envs: &BTreeMap<String, String>) -> Result<()> {
    if envs.len() > MAX_ENVS {
        return Err(Error::invalid(
            field,
            format!("{} entries; at most {MAX_ENVS}", envs.len()),
        ));
    }
    let mut total = 0;
    for (name, value) in envs {
        env_name(field, name)?;
        if value.len() > MAX_ENV_VALUE {
            return Err(Error::invalid(
                field,
                format!(
                    "value of {name} is {} bytes; at most {MAX_ENV_VALUE}",
                    value.len()
                ),
            ));
        }
        total += name.len() + value.len();
    }
    if total > MAX_ENV_TOTAL {
        return Err(Error::invalid(
            field,
            format!("{total} bytes in all; at most {MAX_ENV_TOTAL}"),
        ));
    }
    Ok(())
}

/// A shape id's form, `s-<n>vcpu-<size>` (e.g. `s-1vcpu-1gb`). Whether the shape exists is the
/// catalog's call ([`crate::Client::list_shapes`]).
pub fn shape(field: &str, shape: &str) -> Result<()> {
    let ok = shape
        .strip_prefix("s-")
        .and_then(|rest| rest.split_once("vcpu-"))
        .map(|(cpu, mem)| {
            !cpu.is_empty()
                && cpu.chars().all(|c| c.is_ascii_digit())
                && (mem.ends_with("mb") || mem.ends_with("gb"))
                && mem.len() > 2
                && mem[..mem.len() - 2].chars().all(|c| c.is_ascii_digit())
        })
        .unwrap_or(false);
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!(
                "unknown shape {shape:?} (shapes look like s-1vcpu-1gb; `cos shapes` lists them)"
            ),
        ))
    }
}

/// A name the server will accept for a disk or template: `^[a-z0-9][a-z0-9-]{0,62}$`.
pub fn resource_name(field: &str, name: &str) -> Result<()> {
    let mut chars = name.chars();
    let ok = matches!(chars.next(), Some(c) if c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.len() <= 63
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("{name:?} must be 1-63 of a-z, 0-9 and '-', starting with a letter or digit"),
        ))
    }
}

/// A sandbox name: 1–63 characters of `[A-Za-z0-9-]`, not starting or ending with `-` (it becomes
/// a hostname).
pub fn sandbox_name(field: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-');
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!("{name:?} must be a hostname label: 1-63 letters, digits or '-'"),
        ))
    }
}

/// Auto-pause delay in seconds.
pub fn auto_pause(field: &str, secs: u32) -> Result<()> {
    if AUTO_PAUSE_RANGE.contains(&secs) {
        Ok(())
    } else {
        Err(Error::invalid(
            field,
            format!(
                "{secs} s is outside {}–{} s",
                AUTO_PAUSE_RANGE.start(),
                AUTO_PAUSE_RANGE.end()
            ),
        ))
    }
}

/// An auto-pause delay written as `90s`, `30m`, `2h`, `1d` or plain seconds, parsed and checked
/// against [`AUTO_PAUSE_RANGE`]; returns the seconds.
pub fn auto_pause_text(field: &str, text: &str) -> Result<u32> {
    let t = text.trim();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t, "s"),
    };
    let n: u64 = digits.parse().map_err(|_| {
        Error::invalid(
            field,
            format!("{text:?} is not a duration like 90s, 30m, 2h or 1d"),
        )
    })?;
    let scale: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(Error::invalid(
                field,
                format!("{text:?} has an unknown unit (use s, m, h or d)"),
            ))
        }
    };
    let secs = n
        .checked_mul(scale)
        .and_then(|s| u32::try_from(s).ok())
        .unwrap_or(u32::MAX);
    auto_pause(field, secs).map_err(|_| {
        Error::invalid(
            field,
            format!(
                "{text:?} is outside {}–{} s (1m to 24h)",
                AUTO_PAUSE_RANGE.start(),
                AUTO_PAUSE_RANGE.end()
            ),
        )
    })?;
    Ok(secs)
}

/// A TCP port, 1–65535.
pub fn port(field: &str, port: u32) -> Result<u16> {
    u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| Error::invalid(field, format!("{port} is not a TCP port (1-65535)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(id("sandbox", "sb-01JABCDEF").is_ok());
        assert!(id("sandbox", "sb_01h").is_ok());
        for bad in ["", "a/b", "a b", "..", "x;rm", "é", &"a".repeat(129)] {
            assert!(id("sandbox", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn paths() {
        assert!(guest_path("path", "/root/a.txt").is_ok());
        for bad in ["root/a", "", "/a/../b", "/a/..", "/a\0b"] {
            assert!(guest_path("path", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn env_rules() {
        assert!(env_name("envs", "_A1").is_ok());
        assert!(env_name("envs", "1A").is_err());
        assert!(env_name("envs", "A-B").is_err());
        let mut m = BTreeMap::new();
        m.insert("A".to_string(), "x".repeat(MAX_ENV_VALUE + 1));
        assert!(envs("envs", &m).is_err());
        let many: BTreeMap<_, _> = (0..=MAX_ENVS)
            .map(|i| (format!("V{i}"), String::new()))
            .collect();
        assert!(envs("envs", &many).is_err());
    }

    #[test]
    fn shapes_and_names() {
        assert!(shape("shape", "s-1vcpu-256mb").is_ok());
        assert!(shape("shape", "s-4vcpu-8gb").is_ok());
        for bad in ["large", "s-xvcpu-1gb", "s-1vcpu-", "s-1vcpu-1tb"] {
            assert!(shape("shape", bad).is_err(), "{bad}");
        }
        assert!(resource_name("name", "data-1").is_ok());
        assert!(resource_name("name", "-x").is_err());
        assert!(resource_name("name", "Upper").is_err());
        assert!(sandbox_name("name", "brave-otter").is_ok());
        assert!(sandbox_name("name", "bad name").is_err());
        assert!(auto_pause("auto_pause", 59).is_err());
        assert!(auto_pause("auto_pause", 60).is_ok());
        assert_eq!(auto_pause_text("autoPause", "30m").unwrap(), 1800);
        assert_eq!(auto_pause_text("autoPause", "1d").unwrap(), 86_400);
        assert_eq!(auto_pause_text("autoPause", " 600 ").unwrap(), 600);
        for bad in [
            "2d",
            "25h",
            "59",
            "10s",
            "5x",
            "",
            "m",
            "99999999999999999999d",
        ] {
            assert!(auto_pause_text("autoPause", bad).is_err(), "{bad:?}");
        }
        assert_eq!(port("port", 8080).unwrap(), 8080);
        assert!(port("port", 0).is_err());
        assert!(port("port", 70000).is_err());
    }
}
