//! Egress allow-list (E34–E35) and the egress bandwidth quota (E36–E37).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::api::endpoints as ep;
use crate::api::sandboxes::Sandbox;
use crate::error::{Error, Result};
use crate::transport::Call;

/// The egress allow-list of a sandbox. Empty: all outbound traffic allowed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressView {
    /// Sandbox id.
    pub id: String,
    /// Allowed destinations.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub egress: Vec<String>,
}

/// Egress quota and usage of a sandbox. Byte counts are signed: `quota_bytes` is `-1` when
/// unmetered and `remaining_bytes` goes negative once exceeded.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BandwidthView {
    /// Sandbox id.
    pub id: String,
    /// Total transferable bytes (`-1`: unmetered).
    #[serde(default)]
    pub quota_bytes: i64,
    /// Egress billed against the quota.
    #[serde(default)]
    pub used_bytes: i64,
    /// Inbound bytes observed (never enforced).
    #[serde(default)]
    pub ingress_bytes: i64,
    /// Quota minus usage.
    #[serde(default)]
    pub remaining_bytes: i64,
    /// Quota exhausted: egress is blocked until a recharge.
    #[serde(default)]
    pub capped: bool,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    Ok(Option::<Vec<String>>::deserialize(d)?.unwrap_or_default())
}

/// Check one allow-list entry against the grammar of api-reference §7.8: `*`, `host`,
/// `*.host`, `host:port`, `ip`, `ip:port`, `cidr`, `cidr:port` (IPv6 in brackets with a port).
pub fn validate_egress_rule(rule: &str) -> Result<()> {
    let bad = |why: &str| Err(Error::invalid("egress", format!("{rule:?}: {why}")));
    if rule == "*" {
        return Ok(());
    }
    if rule.is_empty() || rule.len() > 253 + 6 || rule.chars().any(char::is_whitespace) {
        return bad("empty, too long or contains spaces");
    }
    // Split an optional :port (bracketed IPv6 first; a bare IPv6 has several colons and no port).
    let (target, port) = if let Some(rest) = rule.strip_prefix('[') {
        match rest.split_once(']') {
            Some((addr, "")) => (addr, None),
            Some((addr, port)) => match port.strip_prefix(':') {
                Some(p) => (addr, Some(p)),
                None => return bad("expected :port after ]"),
            },
            None => return bad("unclosed ["),
        }
    } else if rule.matches(':').count() == 1 {
        let (t, p) = rule.split_once(':').expect("one colon");
        (t, Some(p))
    } else {
        (rule, None)
    };
    if let Some(p) = port {
        match p.parse::<u16>() {
            Ok(n) if n > 0 => {}
            _ => return bad("port must be 1-65535"),
        }
    }
    if let Some((addr, bits)) = target.split_once('/') {
        let ip: IpAddr = match addr.parse() {
            Ok(ip) => ip,
            Err(_) => return bad("CIDR base is not an IP address"),
        };
        let max = if ip.is_ipv4() { 32 } else { 128 };
        return match bits.parse::<u8>() {
            Ok(b) if b <= max => Ok(()),
            _ => bad("CIDR prefix length out of range"),
        };
    }
    if target.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    let host = target.strip_prefix("*.").unwrap_or(target);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if host.split('.').all(label_ok) && !host.chars().all(|c| c.is_ascii_digit() || c == '.') {
        Ok(())
    } else {
        bad("not a host name, IP address or CIDR")
    }
}

impl Sandbox {
    /// The egress allow-list (E34).
    pub async fn egress(&self) -> Result<EgressView> {
        self.client
            .transport
            .json(Call::new(&ep::GET_EGRESS).param(self.id()))
            .await
    }

    /// Replace the egress allow-list (E35); an empty list allows everything.
    pub async fn set_egress(&self, rules: &[String]) -> Result<EgressView> {
        for rule in rules {
            validate_egress_rule(rule)?;
        }
        let call = Call::new(&ep::SET_EGRESS)
            .param(self.id())
            .json(&serde_json::json!({ "egress": rules }))?;
        let view: EgressView = self.client.transport.json(call).await?;
        Ok(view)
    }

    /// Egress quota and usage (E36).
    pub async fn bandwidth(&self) -> Result<BandwidthView> {
        self.client
            .transport
            .json(Call::new(&ep::GET_BANDWIDTH).param(self.id()))
            .await
    }

    /// Add `add_bytes` to the egress quota (E37). Each call adds: it is never retried after a
    /// broken connection.
    pub async fn recharge_bandwidth(&self, add_bytes: i64) -> Result<BandwidthView> {
        if add_bytes <= 0 {
            return Err(Error::invalid("add_bytes", "must be greater than zero"));
        }
        let call = Call::new(&ep::RECHARGE_BANDWIDTH)
            .param(self.id())
            .json(&serde_json::json!({ "add_bytes": add_bytes }))?;
        self.client.transport.json(call).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_grammar() {
        for ok in [
            "*",
            "api.github.com",
            "*.npmjs.org",
            "pypi.org:443",
            "1.2.3.4",
            "1.2.3.4:22",
            "10.0.0.0/8",
            "10.0.0.0/8:443",
            "::1",
            "[2001:db8::1]:443",
            "2001:db8::/32",
        ] {
            assert!(validate_egress_rule(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a b",
            "host:0",
            "host:99999",
            "10.0.0.0/33",
            "-bad.com",
            "x..y",
            "1.2.3.999",
            "[::1",
            "*.*.com",
        ] {
            assert!(validate_egress_rule(bad).is_err(), "{bad}");
        }
    }
}
