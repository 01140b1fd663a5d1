//! Validation rules of sandbox create/fork/patch/egress bodies (§7.2, §7.8, §9).

use std::collections::BTreeMap;
use std::net::IpAddr;

use regex::Regex;
use std::sync::OnceLock;

use crate::envelope::ApiError;

pub const MAX_ENVS: usize = 64;
pub const MAX_ENV_VALUE_BYTES: usize = 4 * 1024;
pub const MAX_ENV_TOTAL_BYTES: usize = 64 * 1024;
pub const AUTO_PAUSE_MIN: i64 = 60;
pub const AUTO_PAUSE_MAX: i64 = 86_400;

fn env_name_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^[A-Za-z_][A-Za-z0-9_]*$").expect("valid regex"))
}

fn sandbox_name_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| Regex::new(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$").expect("valid regex"))
}

fn hostname_label_re() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$").expect("valid regex")
    })
}

/// envs: name regex, ≤64 entries, ≤4 KiB per value, ≤64 KiB total (names + values).
pub fn envs(envs: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if envs.len() > MAX_ENVS {
        return Err(ApiError::validation(
            "envs",
            format!("too many env vars ({} > {MAX_ENVS})", envs.len()),
        ));
    }
    let mut total = 0usize;
    for (name, value) in envs {
        if !env_name_re().is_match(name) {
            return Err(ApiError::validation(
                "envs",
                format!("invalid env name {name:?}"),
            ));
        }
        if value.len() > MAX_ENV_VALUE_BYTES {
            return Err(ApiError::validation(
                "envs",
                format!("value of {name} exceeds {MAX_ENV_VALUE_BYTES} bytes"),
            ));
        }
        total += name.len() + value.len();
    }
    if total > MAX_ENV_TOTAL_BYTES {
        return Err(ApiError::validation(
            "envs",
            format!("envs exceed {MAX_ENV_TOTAL_BYTES} bytes in total"),
        ));
    }
    Ok(())
}

/// auto_pause_after_seconds within 60–86400.
pub fn auto_pause(secs: i64) -> Result<u32, ApiError> {
    if !(AUTO_PAUSE_MIN..=AUTO_PAUSE_MAX).contains(&secs) {
        return Err(ApiError::validation(
            "auto_pause_after_seconds",
            "must be between 60 and 86400",
        ));
    }
    Ok(secs as u32)
}

/// Sandbox names are DNS labels (they become hostnames).
pub fn sandbox_name(name: &str) -> Result<(), ApiError> {
    if !sandbox_name_re().is_match(name) {
        return Err(ApiError::validation(
            "name",
            "name must be 1-63 lowercase letters, digits or '-', starting and ending with a letter or digit",
        ));
    }
    Ok(())
}

fn valid_port(raw: &str) -> bool {
    raw.parse::<u16>().map(|p| p > 0).unwrap_or(false)
}

fn valid_hostname(host: &str) -> bool {
    let host = host.strip_suffix('.').unwrap_or(host);
    !host.is_empty()
        && host.len() <= 253
        && host.split('.').all(|l| hostname_label_re().is_match(l))
        && host.parse::<IpAddr>().is_err()
        // A dotted all-numeric name is a malformed IP, not a host.
        && !host.split('.').all(|l| l.chars().all(|c| c.is_ascii_digit()))
}

fn valid_cidr(raw: &str) -> bool {
    let Some((ip, prefix)) = raw.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<IpAddr>() else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    match ip {
        IpAddr::V4(_) => prefix <= 32,
        IpAddr::V6(_) => prefix <= 128,
    }
}

/// One egress rule: `*`, `host`, `host:port`, `*.host`, `ip`, `ip:port`, `cidr`,
/// `cidr:port` (IPv6 with a port is written `[addr]:port`).
pub fn egress_rule(rule: &str) -> bool {
    let rule = rule.trim();
    if rule == "*" {
        return true;
    }
    if rule.parse::<IpAddr>().is_ok() || valid_cidr(rule) {
        return true;
    }
    // [v6]:port or [v6/len]:port
    if let Some(rest) = rule.strip_prefix('[') {
        if let Some((inner, port)) = rest.split_once("]:") {
            return valid_port(port) && (inner.parse::<IpAddr>().is_ok() || valid_cidr(inner));
        }
        return false;
    }
    let (target, port) = match rule.rsplit_once(':') {
        Some((t, p)) => {
            if !valid_port(p) {
                return false;
            }
            (t, Some(p))
        }
        None => (rule, None),
    };
    let _ = port;
    if target.parse::<std::net::Ipv4Addr>().is_ok() || valid_cidr(target) {
        return true;
    }
    if let Some(domain) = target.strip_prefix("*.") {
        return valid_hostname(domain) || hostname_label_re().is_match(domain);
    }
    valid_hostname(target)
}

/// Validates and normalises (trims) an egress list.
pub fn egress(rules: &[String]) -> Result<Vec<String>, ApiError> {
    let mut out = Vec::with_capacity(rules.len());
    for rule in rules {
        if !egress_rule(rule) {
            return Err(ApiError::validation(
                "egress",
                format!("invalid egress rule {rule:?}"),
            ));
        }
        out.push(rule.trim().to_string());
    }
    Ok(out)
}

/// OpenSSH public keys: `<type> <base64> [comment]`.
pub fn ssh_pubkey(key: &str) -> Result<String, ApiError> {
    let key = key.trim();
    let mut parts = key.split_whitespace();
    let kind = parts.next().unwrap_or("");
    let blob = parts.next().unwrap_or("");
    let known = kind.starts_with("ssh-") || kind.starts_with("ecdsa-") || kind.starts_with("sk-");
    use base64::Engine;
    if !known
        || base64::engine::general_purpose::STANDARD
            .decode(blob)
            .is_err()
    {
        return Err(ApiError::validation(
            "ssh_pubkeys",
            "invalid OpenSSH public key",
        ));
    }
    Ok(key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_grammar() {
        for ok in [
            "*",
            "example.com",
            "example.com:443",
            "*.example.com",
            "1.2.3.4",
            "1.2.3.4:53",
            "10.0.0.0/8",
            "10.0.0.0/8:5432",
            "::1",
            "2001:db8::/32",
            "[2001:db8::1]:443",
        ] {
            assert!(egress_rule(ok), "{ok} should be valid");
        }
        for bad in [
            "",
            "http://x.com",
            "1.2.3.4:0",
            "1.2.3.4:99999",
            "10.0.0.0/33",
            "a..b.com",
            "300.1.1.1",
            "-x.com",
        ] {
            assert!(!egress_rule(bad), "{bad} should be invalid");
        }
    }

    #[test]
    fn env_rules() {
        let mut e = BTreeMap::new();
        e.insert("OK_1".to_string(), "v".to_string());
        assert!(envs(&e).is_ok());
        e.insert("1X".to_string(), "v".to_string());
        assert!(envs(&e).is_err());
        let mut big = BTreeMap::new();
        big.insert("A".to_string(), "x".repeat(MAX_ENV_VALUE_BYTES + 1));
        assert!(envs(&big).is_err());
    }

    #[test]
    fn names_and_auto_pause() {
        assert!(sandbox_name("brave-otter").is_ok());
        assert!(sandbox_name("Bad_Name").is_err());
        assert!(auto_pause(59).is_err());
        assert_eq!(auto_pause(60).unwrap(), 60);
        assert!(auto_pause(86_401).is_err());
    }
}
