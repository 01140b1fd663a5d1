//! Sandbox references: an id, an exact name, or a unique name prefix, looked up over every page
//! of the list (the `createos` CLI only read the first 200 rows, so older sandboxes vanished).

use anyhow::{anyhow, bail, Result};
use futures::TryStreamExt;

use createos_sandbox::{Client, ListSandboxes, Sandbox, SandboxView};

/// Find the sandbox `reference` names.
pub async fn sandbox(client: &Client, reference: &str) -> Result<Sandbox> {
    let reference = reference.trim();
    if reference.is_empty() {
        bail!("empty sandbox reference");
    }
    if looks_like_id(reference) {
        match client.get_sandbox(reference).await {
            Ok(sb) => return Ok(sb),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e.into()),
        }
    }
    let all: Vec<SandboxView> = client
        .list_sandboxes(ListSandboxes::default())
        .try_collect()
        .await?;
    let id = pick(&all, reference)?;
    Ok(client.get_sandbox(&id).await?)
}

fn looks_like_id(s: &str) -> bool {
    s.starts_with("sb-") || s.starts_with("sb_")
}

/// Choose among listed sandboxes: exact id, then exact name (live before destroyed, newest first),
/// then a unique prefix of a live sandbox's name.
pub fn pick(all: &[SandboxView], reference: &str) -> Result<String> {
    if let Some(v) = all.iter().find(|v| v.id == reference) {
        return Ok(v.id.clone());
    }
    let named: Vec<&SandboxView> = all
        .iter()
        .filter(|v| v.name.as_deref() == Some(reference))
        .collect();
    if let Some(v) = named.iter().rev().find(|v| !v.status.is_terminal()) {
        return Ok(v.id.clone());
    }
    if let Some(v) = named.last() {
        return Ok(v.id.clone());
    }
    let prefixed: Vec<&SandboxView> = all
        .iter()
        .filter(|v| {
            !v.status.is_terminal() && v.name.as_deref().is_some_and(|n| n.starts_with(reference))
        })
        .collect();
    match prefixed.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(anyhow!(createos_sandbox::Error::invalid(
            "sandbox",
            format!("no sandbox has the id or name {reference:?} (`cos ls` lists them)")
        ))),
        many => {
            let names: Vec<String> = many
                .iter()
                .map(|v| format!("{} ({})", v.name.clone().unwrap_or_default(), v.id))
                .collect();
            bail!(
                "{reference:?} matches several sandboxes: {}; use the full name or id",
                names.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use createos_sandbox::SandboxStatus;

    fn view(id: &str, name: &str, status: SandboxStatus) -> SandboxView {
        SandboxView {
            id: id.into(),
            name: Some(name.into()),
            status,
            ..Default::default()
        }
    }

    #[test]
    fn picks_by_id_name_and_prefix() {
        let all = vec![
            view("sb-1", "web", SandboxStatus::Destroyed),
            view("sb-2", "web", SandboxStatus::Running),
            view("sb-3", "worker-a", SandboxStatus::Running),
            view("sb-4", "worker-b", SandboxStatus::Paused),
            view("sb-5", "db", SandboxStatus::Destroyed),
        ];
        assert_eq!(pick(&all, "sb-1").unwrap(), "sb-1");
        assert_eq!(pick(&all, "web").unwrap(), "sb-2");
        assert_eq!(pick(&all, "db").unwrap(), "sb-5");
        assert_eq!(pick(&all, "worker-a").unwrap(), "sb-3");
        assert!(pick(&all, "worker")
            .unwrap_err()
            .to_string()
            .contains("several"));
        assert!(pick(&all, "nope").is_err());
    }
}
