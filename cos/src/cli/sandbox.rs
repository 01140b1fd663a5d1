//! Sandbox lifecycle commands: create, ls, get, rm, pause, resume, fork, edit, resize, ssh-key,
//! bandwidth, metrics.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use futures::TryStreamExt;
use serde_json::json;

use createos_sandbox::{
    CreateSandbox, ForkOptions, ListSandboxes, Sandbox, SandboxStatus, SandboxView, UpdateSandbox,
};

use super::output::table;
use super::{catalog, parse_kv, resolve, Ctx};

/// Default shape when neither `--shape` nor `CREATEOS_SHAPE` is given.
pub const DEFAULT_SHAPE: &str = "s-1vcpu-1gb";

#[derive(Debug, Args)]
pub struct Target {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
}

#[derive(Debug, Args)]
pub struct WaitTarget {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Return as soon as the server accepted the request.
    #[arg(long)]
    pub no_wait: bool,
}

/// Options shared by `create` and `run`.
#[derive(Debug, Args, Clone)]
pub struct SandboxOptions {
    /// Shape (`cos shapes`).
    #[arg(long, env = "CREATEOS_SHAPE", default_value = DEFAULT_SHAPE)]
    pub shape: String,
    /// Base image or template (`cos images`; server default devbox:1).
    #[arg(long, alias = "rootfs", env = "CREATEOS_ROOTFS")]
    pub image: Option<String>,
    /// Environment variable exported into every command (repeatable).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = parse_kv)]
    pub envs: Vec<(String, String)>,
    /// Network to join (id or name, repeatable).
    #[arg(long = "network")]
    pub networks: Vec<String>,
    /// Egress allow-list entry (repeatable; none = open).
    #[arg(long = "egress")]
    pub egress: Vec<String>,
    /// Publish ports at a preview URL.
    #[arg(long)]
    pub ingress: bool,
    /// Pause after this many idle seconds (60-86400).
    #[arg(long, value_name = "SECS")]
    pub auto_pause: Option<u32>,
    /// Root disk size in MiB (default: the shape's).
    #[arg(long)]
    pub disk_mib: Option<u64>,
    /// Authorize an SSH public key file (repeatable).
    #[arg(long = "ssh-key", value_name = "FILE")]
    pub ssh_keys: Vec<PathBuf>,
}

impl SandboxOptions {
    /// The create request, validated (files read, shape checked against the catalog).
    pub async fn request(&self, ctx: &Ctx, name: Option<String>) -> Result<CreateSandbox> {
        let mut req = CreateSandbox::new(&self.shape);
        req.rootfs = self.image.clone();
        req.name = name;
        for (k, v) in &self.envs {
            req.envs.insert(k.clone(), v.clone());
        }
        for n in &self.networks {
            req = req.network(n);
        }
        if !self.egress.is_empty() {
            req = req.egress(self.egress.iter().cloned());
        }
        if self.ingress {
            req = req.ingress(true);
        }
        req.auto_pause_after_seconds = self.auto_pause;
        req.disk_mib = self.disk_mib;
        for file in &self.ssh_keys {
            let key = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            req = req.ssh_pubkey(key.trim());
        }
        req.validate()?;
        catalog::check_shape(ctx, &self.shape).await?;
        Ok(req)
    }
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    /// Name (unique among your live sandboxes; default: generated).
    #[arg(long)]
    pub name: Option<String>,
    #[command(flatten)]
    pub options: SandboxOptions,
}

pub async fn create(ctx: &Ctx, args: CreateArgs) -> Result<()> {
    let req = args.options.request(ctx, args.name).await?;
    let sb = ctx.client.create_sandbox(req).await?;
    let view = sb.view();
    ctx.out.show(&view, || describe(&view));
    Ok(())
}

#[derive(Debug, Args)]
pub struct LsArgs {
    /// Only this status (running, paused, destroyed, …).
    #[arg(long)]
    pub status: Option<String>,
    /// Include destroyed and failed sandboxes.
    #[arg(long, short = 'a')]
    pub all: bool,
}

pub async fn ls(ctx: &Ctx, args: LsArgs) -> Result<()> {
    let filter = ListSandboxes {
        status: args.status.as_deref().map(SandboxStatus::from),
    };
    let mut rows: Vec<SandboxView> = ctx.client.list_sandboxes(filter).try_collect().await?;
    if !args.all && args.status.is_none() {
        rows.retain(|v| !v.status.is_terminal());
    }
    ctx.out.show(&rows, || {
        table(
            &["ID", "NAME", "STATUS", "SHAPE", "IMAGE", "IP"],
            rows.iter()
                .map(|v| {
                    vec![
                        v.id.clone(),
                        v.name.clone().unwrap_or_default(),
                        v.status.to_string(),
                        v.shape.clone().unwrap_or_default(),
                        v.rootfs.clone().unwrap_or_default(),
                        v.ip.clone().unwrap_or_default(),
                    ]
                })
                .collect(),
        )
    });
    Ok(())
}

pub async fn get(ctx: &Ctx, args: Target) -> Result<()> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let view = sb.view();
    ctx.out.show(&view, || describe(&view));
    Ok(())
}

#[derive(Debug, Args)]
pub struct RmArgs {
    /// Sandboxes (ids, names or prefixes).
    #[arg(required = true)]
    pub sandboxes: Vec<String>,
    /// Do not ask for confirmation (required when stdin is not a terminal).
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Wait until each is destroyed.
    #[arg(long)]
    pub wait: bool,
}

pub async fn rm(ctx: &Ctx, args: RmArgs) -> Result<()> {
    let mut targets = Vec::new();
    for r in &args.sandboxes {
        targets.push(resolve::sandbox(&ctx.client, r).await?);
    }
    if !args.yes {
        if !std::io::stdin().is_terminal() {
            bail!("refusing to destroy without confirmation: pass --yes");
        }
        let names: Vec<String> = targets.iter().map(label).collect();
        eprint!("Destroy {}? [y/N] ", names.join(", "));
        let mut line = String::new();
        std::io::stdin().read_line(&mut line)?;
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            bail!("aborted");
        }
    }
    let mut results = Vec::new();
    for sb in targets {
        let out = sb.destroy().await?;
        if args.wait {
            sb.wait_until_destroyed(None).await?;
        }
        results.push(json!({ "id": out.id, "status": if args.wait { "destroyed".to_string() } else { out.status.to_string() } }));
    }
    ctx.out.show(&results, || {
        results
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r["id"].as_str().unwrap_or(""),
                    r["status"].as_str().unwrap_or("")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

pub async fn pause(ctx: &Ctx, args: WaitTarget) -> Result<()> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let view = if args.no_wait {
        sb.pause().await?
    } else {
        sb.pause_and_wait().await?
    };
    ctx.out
        .show(&view, || format!("{} {}", label(&sb), view.status));
    Ok(())
}

pub async fn resume(ctx: &Ctx, args: WaitTarget) -> Result<()> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let view = if args.no_wait {
        sb.resume().await?
    } else {
        sb.resume_and_wait().await?
    };
    ctx.out
        .show(&view, || format!("{} {}", label(&sb), view.status));
    Ok(())
}

#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The paused source sandbox.
    pub sandbox: String,
    /// Number of children.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=25))]
    pub count: u32,
    /// Leave the children paused.
    #[arg(long)]
    pub start_paused: bool,
    /// Replace the environment (repeatable; default: inherited).
    #[arg(long = "env", short = 'e', value_name = "KEY=VALUE", value_parser = parse_kv)]
    pub envs: Vec<(String, String)>,
    /// Replace the egress list (repeatable; default: inherited).
    #[arg(long = "egress")]
    pub egress: Vec<String>,
    /// Publish ports in the children (`on`/`off`; default: inherited).
    #[arg(long, value_parser = parse_on_off)]
    pub ingress: Option<bool>,
}

pub async fn fork(ctx: &Ctx, args: ForkArgs) -> Result<()> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let options = ForkOptions {
        start_paused: args.start_paused.then_some(true),
        envs: (!args.envs.is_empty()).then(|| args.envs.iter().cloned().collect()),
        egress: (!args.egress.is_empty()).then(|| args.egress.clone()),
        ingress_enabled: args.ingress,
        ssh_pubkeys: None,
    };
    if sb.status() == SandboxStatus::Running {
        bail!("{} is running: pause it first (`cos pause {}`); forks are taken from a paused snapshot", label(&sb), sb.id());
    }
    let mut children = Vec::new();
    for _ in 0..args.count {
        children.push(sb.fork(options.clone()).await?.view());
    }
    ctx.out.show(&children, || {
        children
            .iter()
            .map(|c| {
                format!(
                    "{} {} {}",
                    c.id,
                    c.name.clone().unwrap_or_default(),
                    c.status
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

fn parse_on_off(s: &str) -> std::result::Result<bool, String> {
    match s {
        "on" | "true" | "yes" => Ok(true),
        "off" | "false" | "no" => Ok(false),
        other => Err(format!("{other:?}: expected on or off")),
    }
}

#[derive(Debug, Args)]
pub struct EditArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Publish ports (`on`) or stop (`off`).
    #[arg(long, value_parser = parse_on_off)]
    pub ingress: Option<bool>,
    /// Idle seconds before auto-pause (60-86400), or `off`.
    #[arg(long, value_name = "SECS|off")]
    pub auto_pause: Option<String>,
    /// Replace the egress allow-list with these entries (repeatable).
    #[arg(long = "egress")]
    pub egress: Vec<String>,
    /// Clear the egress allow-list (allow everything).
    #[arg(long, conflicts_with = "egress")]
    pub egress_open: bool,
}

pub async fn edit(ctx: &Ctx, args: EditArgs) -> Result<()> {
    let mut changes = UpdateSandbox {
        ingress_enabled: args.ingress,
        ..Default::default()
    };
    match args.auto_pause.as_deref() {
        Some("off") => changes.disable_auto_pause = Some(true),
        Some(secs) => {
            let secs: u32 = secs.parse().map_err(|_| {
                createos_sandbox::Error::invalid(
                    "auto-pause",
                    format!("{secs:?} is not a number of seconds or `off`"),
                )
            })?;
            createos_sandbox::validate::auto_pause("auto-pause", secs)?;
            changes.auto_pause_after_seconds = Some(secs);
        }
        None => {}
    }
    let egress_change = args.egress_open || !args.egress.is_empty();
    if changes == UpdateSandbox::default() && !egress_change {
        bail!("nothing to change: give --ingress, --auto-pause, --egress or --egress-open");
    }
    for rule in &args.egress {
        createos_sandbox::api::security::validate_egress_rule(rule)?;
    }
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    if changes != UpdateSandbox::default() {
        sb.update(changes).await?;
    }
    if egress_change {
        sb.set_egress(&args.egress).await?;
    }
    let view = sb.refresh().await?;
    ctx.out.show(&view, || describe(&view));
    Ok(())
}

#[derive(Debug, Args)]
pub struct ResizeArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// New root disk size in MiB (must exceed the current size).
    #[arg(long)]
    pub disk_mib: u64,
}

pub async fn resize(ctx: &Ctx, args: ResizeArgs) -> Result<()> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let out = sb.resize_disk(args.disk_mib).await?;
    ctx.out
        .show(&out, || format!("{} disk {} MiB", out.id, out.disk_mib));
    Ok(())
}

#[derive(Debug, Args)]
pub struct SshKeyArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Public key files (OpenSSH format).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
}

pub async fn ssh_key(ctx: &Ctx, args: SshKeyArgs) -> Result<()> {
    let mut keys = Vec::new();
    for f in &args.files {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        keys.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string),
        );
    }
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let out = sb.add_ssh_pubkeys(&keys).await?;
    ctx.out
        .show(&out, || format!("{} keys authorized", out.count));
    Ok(())
}

#[derive(Debug, Args)]
pub struct BandwidthArgs {
    /// Sandbox id, name, or unique name prefix.
    pub sandbox: String,
    /// Add this many bytes to the quota (suffixes: KiB, MiB, GiB).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub recharge: Option<i64>,
}

/// `123`, `10MiB`, `5GiB`, `1G`.
pub fn parse_size(s: &str) -> std::result::Result<i64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: i64 = num.parse().map_err(|_| format!("{s:?} is not a size"))?;
    let mult: i64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => return Err(format!("unknown size unit {other:?}")),
    };
    n.checked_mul(mult)
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("{s:?} is out of range"))
}

pub async fn bandwidth(ctx: &Ctx, args: BandwidthArgs) -> Result<()> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let view = match args.recharge {
        Some(bytes) => sb.recharge_bandwidth(bytes).await?,
        None => sb.bandwidth().await?,
    };
    ctx.out.show(&view, || {
        format!(
            "quota      {}\nused       {}\nremaining  {}\ningress    {}\ncapped     {}",
            view.quota_bytes,
            view.used_bytes,
            view.remaining_bytes,
            view.ingress_bytes,
            view.capped
        )
    });
    Ok(())
}

pub async fn metrics(ctx: &Ctx, args: Target) -> Result<()> {
    let sb = resolve::sandbox(&ctx.client, &args.sandbox).await?;
    let m = sb.metrics().await?;
    ctx.out.value(&m);
    Ok(())
}

/// `name (id)` or just the id.
pub fn label(sb: &Sandbox) -> String {
    match sb.view().name {
        Some(n) => format!("{n} ({})", sb.id()),
        None => sb.id().to_string(),
    }
}

/// Multi-line description of a sandbox for people.
pub fn describe(v: &SandboxView) -> String {
    let mut lines = vec![
        format!("id        {}", v.id),
        format!("name      {}", v.name.clone().unwrap_or_default()),
        format!("status    {}", v.status),
    ];
    if let Some(s) = &v.shape {
        lines.push(format!(
            "shape     {s} ({} vCPU, {} MiB, disk {} MiB)",
            v.vcpu, v.mem_mib, v.disk_mib
        ));
    }
    if let Some(r) = &v.rootfs {
        lines.push(format!("image     {r}"));
    }
    if let Some(ip) = &v.ip {
        lines.push(format!("ip        {ip}"));
    }
    if let Some(t) = &v.ingress_url_template {
        lines.push(format!("ingress   {t}"));
    }
    if let Some(e) = v.egress.as_ref().filter(|e| !e.is_empty()) {
        lines.push(format!("egress    {}", e.join(", ")));
    }
    if let Some(s) = v.auto_pause_after_seconds {
        lines.push(format!("autopause {s}s"));
    }
    if let Some(p) = &v.forked_from {
        lines.push(format!("forked    from {p}"));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("10").unwrap(), 10);
        assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
        assert_eq!(parse_size("5 MiB").unwrap(), 5 << 20);
        assert!(parse_size("0").is_err());
        assert!(parse_size("1XB").is_err());
        assert!(parse_size("lots").is_err());
    }
}
