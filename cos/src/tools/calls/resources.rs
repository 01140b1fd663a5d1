//! Catalog, ingress, preview URLs, firewall, bandwidth and networks.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::json;

use super::{named, to_json, ToolOutput};
use crate::tools::args::Args;
use crate::tools::runtime::Runtime;
use crate::tools::ToolError;
use createos_sandbox::UpdateSandbox;

pub(super) async fn shapes(rt: &Arc<Runtime>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(
        rt.client().list_shapes().collect_all().await?,
    )?))
}

pub(super) async fn images(rt: &Arc<Runtime>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(rt.client().rootfs().await?)?))
}

pub(super) async fn ingress(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    let enabled = args
        .opt_bool("enabled")
        .ok_or_else(|| ToolError::InvalidArgs("missing \"enabled\"".into()))?;
    let view = sandbox
        .update(UpdateSandbox {
            ingress_enabled: Some(enabled),
            ..Default::default()
        })
        .await?;
    Ok(ToolOutput::json(json!({
        "sandbox_id": view.id,
        "ingress_enabled": view.ingress_enabled,
        "ingress_url_template": view.ingress_url_template,
    }))
    .with("sandboxId", sandbox.id()))
}

pub(super) async fn preview_url(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    let port =
        createos_sandbox::validate::port("port", args.u64("port")?.min(u32::MAX as u64) as u32)?;
    let view = sandbox.refresh().await?;
    let url = view.preview_url(port).ok_or_else(|| {
        ToolError::Refused(format!(
            "sandbox {} has no preview URL template; enable ingress with sandbox_ingress first",
            view.id
        ))
    })?;
    Ok(ToolOutput::json(
        json!({"url": url, "ingress_enabled": view.ingress_enabled, "verified": false}),
    )
    .with("sandboxId", sandbox.id()))
}

/// An IPv4/IPv6 address or CIDR with a mask within the address width.
pub(crate) fn ip_or_cidr(rule: &str) -> bool {
    let (addr, mask) = match rule.split_once('/') {
        Some((a, m)) => (a, Some(m)),
        None => (rule, None),
    };
    let Ok(ip) = addr.parse::<IpAddr>() else {
        return false;
    };
    let width = if ip.is_ipv4() { 32 } else { 128 };
    match mask {
        None => true,
        Some(m) => m.parse::<u8>().is_ok_and(|m| m <= width) && !m.starts_with('+'),
    }
}

pub(super) async fn firewall(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    let rules = args.strings("rules");
    if let Some(bad) = rules.iter().find(|r| !ip_or_cidr(r)) {
        return Err(ToolError::InvalidArgs(format!(
            "{bad:?} is not an IP address or CIDR; hostname rules are accepted by the platform but not enforced, so only IP/CIDR rules are allowed"
        )));
    }
    let view = sandbox.set_egress(&rules).await?;
    Ok(ToolOutput::json(to_json(view)?).with("sandboxId", sandbox.id()))
}

pub(super) async fn bandwidth(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    let sandbox = named(rt, args)?;
    Ok(ToolOutput::json(to_json(sandbox.bandwidth().await?)?).with("sandboxId", sandbox.id()))
}

pub(super) async fn network_create(
    rt: &Arc<Runtime>,
    args: &Args,
) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(
        rt.client().create_network(args.str("name")?).await?,
    )?))
}

pub(super) async fn network_list(rt: &Arc<Runtime>) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(
        rt.client().list_networks().collect_all().await?,
    )?))
}

pub(super) async fn network_show(rt: &Arc<Runtime>, args: &Args) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(
        rt.client().get_network(args.str("name")?).await?,
    )?))
}

pub(super) async fn network_delete(
    rt: &Arc<Runtime>,
    args: &Args,
) -> Result<ToolOutput, ToolError> {
    Ok(ToolOutput::json(to_json(
        rt.client().delete_network(args.str("name")?).await?,
    )?))
}

pub(super) async fn network_attach(
    rt: &Arc<Runtime>,
    args: &Args,
    attach: bool,
) -> Result<ToolOutput, ToolError> {
    let network = args.str("network")?;
    let sandbox = rt.client().sandbox(args.str("member")?)?;
    let answer = if attach {
        sandbox.attach_network(network).await?
    } else {
        sandbox.detach_network(network).await?
    };
    Ok(ToolOutput::json(to_json(answer)?).with("sandboxId", sandbox.id()))
}

#[cfg(test)]
mod tests {
    use super::ip_or_cidr;

    #[test]
    fn firewall_rules_are_ip_or_cidr_only() {
        for ok in [
            "10.0.0.1",
            "10.0.0.0/8",
            "0.0.0.0/0",
            "::1",
            "2001:db8::/32",
            "fe80::/128",
        ] {
            assert!(ip_or_cidr(ok), "{ok}");
        }
        for bad in [
            "example.com",
            "*.example.com",
            "10.0.0.0/33",
            "::/129",
            "10.0.0.1:443",
            "10.0.0.0/",
            "10.0.0.0/+8",
            "",
        ] {
            assert!(!ip_or_cidr(bad), "{bad}");
        }
    }
}
