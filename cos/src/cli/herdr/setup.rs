//! `cos setup herdr`: prerequisites, plugin link, `config.json`, key bindings.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use futures::TryStreamExt;

use crate::herdr::host::HerdrHost;
use crate::herdr::setup::{self, SetupOptions};
use crate::herdr::{HerdrError, HerdrResult, PLUGIN_ID};
use createos_sandbox::ListSandboxes;

use super::Launch;

/// How to open the `boxes` overlay: plugin panes cannot be bound to keys.
const BOXES_PANE: &str = "herdr plugin pane open --plugin createos.sandbox --entrypoint boxes";

#[derive(Debug, Args)]
pub struct SetupHerdrArgs {
    /// Report the prerequisites and change nothing.
    #[arg(long)]
    pub doctor: bool,
    /// Agent: claude-code, codex, opencode, pi, cursor, shell.
    #[arg(long, env = "CREATEOS_AGENT")]
    pub agent: Option<String>,
    /// Sandbox shape (default s-2vcpu-4gb).
    #[arg(long, env = "CREATEOS_SHAPE")]
    pub shape: Option<String>,
    /// Base image.
    #[arg(long, env = "CREATEOS_ROOTFS")]
    pub rootfs: Option<String>,
    /// Pause a sandbox after this long without activity (default 30m).
    #[arg(long)]
    pub auto_pause: Option<String>,
    /// Where the worktree lands in the sandbox (default /workspace).
    #[arg(long)]
    pub remote_root: Option<String>,
    /// Leave Herdr's config.toml alone.
    #[arg(long)]
    pub no_keys: bool,
    /// Replace an existing plugin config.json.
    #[arg(long)]
    pub force: bool,
}

pub(super) async fn setup_with(launch: Launch, args: SetupHerdrArgs) -> ExitCode {
    match setup_herdr(&launch, args).await {
        Ok(code) => code,
        Err(e) => {
            if launch.out.json {
                println!(
                    "{}",
                    serde_json::json!({ "error": { "code": "setup_failed", "message": e.to_string() } })
                );
            }
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
    }
}

async fn setup_herdr(launch: &Launch, args: SetupHerdrArgs) -> HerdrResult<ExitCode> {
    let options = SetupOptions {
        doctor: args.doctor,
        agent: args.agent,
        shape: args.shape,
        rootfs: args.rootfs,
        auto_pause: args.auto_pause,
        remote_root: args.remote_root,
        no_keys: args.no_keys,
        force: args.force,
    };
    // Flags are checked before anything is looked at or written.
    let config = options.plugin_config()?;
    let host = HerdrHost::from_env();
    let mut checks = setup::check_tools(&host).await;
    checks.push(match &launch.client {
        Ok(client) => match client
            .list_sandboxes(ListSandboxes::default())
            .try_next()
            .await
        {
            Ok(_) => setup::Check {
                name: "createos session".into(),
                ok: true,
                detail: format!("{}", client.base_url()),
            },
            Err(e) => setup::Check {
                name: "createos session".into(),
                ok: false,
                detail: e.to_string(),
            },
        },
        Err(m) => setup::Check {
            name: "createos session".into(),
            ok: false,
            detail: m.clone(),
        },
    });
    let all_ok = checks.iter().all(|c| c.ok);
    for c in &checks {
        eprintln!(
            "{} {:<17} {}",
            if c.ok { "ok  " } else { "FAIL" },
            c.name,
            c.detail
        );
    }
    let checks_json: Vec<serde_json::Value> = checks
        .iter()
        .map(|c| serde_json::json!({ "name": c.name, "ok": c.ok, "detail": c.detail }))
        .collect();
    if options.doctor {
        if launch.out.json {
            println!(
                "{}",
                serde_json::json!({ "ok": all_ok, "checks": checks_json })
            );
        }
        return Ok(if all_ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    if !all_ok {
        return Err(HerdrError::invalid(
            "prerequisites",
            "some checks failed (see above); fix them and run again",
        ));
    }

    let plugin_dir = setup::default_plugin_dir()
        .ok_or_else(|| HerdrError::invalid("plugin directory", "no data directory (set HOME)"))?;
    let cos = PathBuf::from(&launch.cos[0]);
    setup::write_plugin_dir(&plugin_dir, &cos)?;
    // A plugin Herdr already has (linked, or installed from GitHub; enabled or not) is left as
    // it is: relinking would replace a GitHub install and re-enable a disabled plugin.
    let installed = setup::installed_plugin(&host).await?;
    if installed.is_none() {
        host.call(&[
            "plugin".into(),
            "link".into(),
            plugin_dir.to_string_lossy().into_owned(),
        ])
        .await?;
    }
    let config_dir = host.config_dir(PLUGIN_ID).await?;
    let config_written = setup::write_plugin_config(&config_dir, &config, options.force)?;
    let mut keys = setup::KeysOutcome::default();
    let config_toml = setup::herdr_config_path();
    if !options.no_keys {
        let path = config_toml.clone().ok_or_else(|| {
            HerdrError::invalid(
                "herdr config",
                "no config directory (set HOME or HERDR_CONFIG_PATH)",
            )
        })?;
        keys = setup::install_key_bindings(&path, || host.config_check()).await?;
        if keys.changed() {
            // No running server is not an error: the keys load when it starts.
            let _ = host.call(&["server".into(), "reload-config".into()]).await;
        }
    }
    let plugin_json = installed
        .as_ref()
        .map(|p| serde_json::json!({ "enabled": p.enabled, "source": p.source, "root": p.root }));
    let summary = serde_json::json!({
        "ok": true,
        "checks": checks_json,
        "plugin_dir": plugin_dir,
        "linked": installed.is_none(),
        "plugin": plugin_json,
        "config": config_dir.join("config.json"),
        "config_written": config_written,
        "config_toml": config_toml,
        "keys_added": keys.added,
        "keys_moved": keys.moved,
        "key_notes": keys.notes,
        "backup": keys.backup,
        "boxes_pane": BOXES_PANE,
    });
    if launch.out.json {
        println!("{summary}");
    } else {
        match &installed {
            None => println!("plugin   {} (linked)", plugin_dir.display()),
            Some(p) => {
                let how = if p.source == "github" {
                    "installed from GitHub"
                } else {
                    "already linked"
                };
                let state = if p.enabled {
                    ""
                } else {
                    "; disabled: enable it with `herdr plugin enable createos.sandbox`"
                };
                println!("plugin   {} ({how}, kept{state})", p.root);
            }
        }
        println!(
            "config   {} ({})",
            config_dir.join("config.json").display(),
            if config_written {
                "written"
            } else {
                "kept; --force replaces it"
            }
        );
        if options.no_keys {
            println!("keys     left alone (--no-keys)");
        } else {
            let added: Vec<String> = keys
                .added
                .iter()
                .map(|k| format!("{} {}", k.action, k.key))
                .collect();
            println!(
                "keys     {} added{}",
                added.len(),
                if added.is_empty() {
                    String::new()
                } else {
                    format!(": {}", added.join(", "))
                }
            );
            for note in &keys.notes {
                println!("         {note}");
            }
            if let Some(backup) = &keys.backup {
                println!(
                    "         the file before: {} (copy it back to undo)",
                    backup.display()
                );
            }
        }
        println!("boxes    {BOXES_PANE} (plugin panes cannot be bound to keys)");
    }
    Ok(ExitCode::SUCCESS)
}
