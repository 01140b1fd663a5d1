//! Outbound network of sandboxes: in namespaces mode a veth link to the host (when the
//! host allows it), else the documented fallback (loopback only); in fallback isolation
//! the host's own network.

mod common;

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::start;
use createos_mock::isolation::outbound::find_tool;
use createos_mock::isolation::{IsolationKind, OutboundReach};
use serde_json::json;
use tokio::io::AsyncReadExt;

const STEP: Duration = Duration::from_secs(20);

/// Whether this host lets root create a veth pair, checked independently of the
/// emulator so a broken link setup cannot pass as "unsupported".
fn host_supports_veth() -> bool {
    if !nix_is_root() {
        return false;
    }
    let Some(ip) = find_tool("ip") else {
        return false;
    };
    let name = format!("cmt{}", std::process::id() % 100_000);
    let peer = format!("{name}p");
    let created = Command::new(&ip)
        .args(["link", "add", &name, "type", "veth", "peer", "name", &peer])
        .output()
        .is_ok_and(|o| o.status.success());
    if created {
        let _ = Command::new(&ip).args(["link", "del", &name]).output();
    }
    created
}

fn nix_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// A global IPv4 address of the host that is not a sandbox link address.
fn host_global_ipv4() -> Option<Ipv4Addr> {
    let ip = find_tool("ip")?;
    let out = Command::new(ip)
        .args(["-4", "-o", "addr", "show", "scope", "global"])
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            words.find(|w| *w == "inet")?;
            words.next()?.split('/').next()?.parse::<Ipv4Addr>().ok()
        })
        .find(|a| a.octets()[..2] != [10, 213])
}

/// Runs a TCP server on `addr` and has the sandbox send it a line; returns what the
/// server received (`None` when the sandbox could not connect).
async fn sandbox_sends_to(env: &common::Env, id: &str, addr: Ipv4Addr) -> Option<String> {
    let listener = tokio::net::TcpListener::bind((addr, 0))
        .await
        .expect("bind on the host");
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.ok()?;
        let mut got = String::new();
        conn.read_to_string(&mut got).await.ok()?;
        Some(got)
    });
    let script = format!("exec bash -c 'echo hello-from-sandbox > /dev/tcp/{addr}/{port}'");
    let (_, stderr, code) = tokio::time::timeout(STEP, env.sh(id, &script))
        .await
        .expect("exec in time");
    if code != 0 {
        server.abort();
        eprintln!("sandbox could not connect to {addr}:{port}: {stderr}");
        return None;
    }
    Some(
        tokio::time::timeout(STEP, server)
            .await
            .expect("accept in time")
            .unwrap()
            .expect("a connection"),
    )
}

#[tokio::test]
async fn sandboxes_reach_the_host_when_the_host_allows_it() {
    let env = start().await;
    let state = env.mock.state();
    let id = env.create(json!({})).await;
    let sandbox = state.sandboxes.get(&id).unwrap();
    eprintln!(
        "isolation {:?}, outbound {:?}",
        state.isolation.kind(),
        state.isolation.outbound_reach()
    );

    if state.isolation.kind() == IsolationKind::Fallback {
        // No namespaces: sandbox processes share the host's network.
        assert_eq!(state.isolation.outbound_reach(), None);
        assert!(sandbox.runtime().link().is_none());
        let got = sandbox_sends_to(&env, &id, Ipv4Addr::LOCALHOST).await;
        assert_eq!(got.as_deref(), Some("hello-from-sandbox\n"));
        env.mock.shutdown().await;
        return;
    }

    match sandbox.runtime().link() {
        Some(link) => {
            assert_ne!(
                state.isolation.outbound_reach(),
                Some(OutboundReach::LoopbackOnly)
            );
            let host_if = link.host_interface().to_string();
            let got = sandbox_sends_to(&env, &id, link.host_ip()).await;
            assert_eq!(
                got.as_deref(),
                Some("hello-from-sandbox\n"),
                "the host's veth address"
            );
            if let Some(global) = host_global_ipv4() {
                let got = sandbox_sends_to(&env, &id, global).await;
                assert_eq!(
                    got.as_deref(),
                    Some("hello-from-sandbox\n"),
                    "the host's address {global}"
                );
            }
            let (addr, _, _) = env.sh(&id, "cat /proc/net/fib_trie").await;
            assert!(
                addr.contains(&link.guest_ip().to_string()),
                "eth0 holds {}: {addr}",
                link.guest_ip()
            );

            // A second sandbox gets its own subnet; destroy removes the link.
            let other = env.create(json!({})).await;
            let other_sb = state.sandboxes.get(&other).unwrap();
            let other_link = other_sb
                .runtime()
                .link()
                .expect("second sandbox linked too");
            assert_ne!(other_link.host_ip(), link.host_ip());
            assert!(Path::new("/sys/class/net").join(&host_if).exists());
            env.delete(&format!("/v1/sandboxes/{id}")).await;
            env.wait_status(&id, "destroyed").await;
            assert!(
                !Path::new("/sys/class/net").join(&host_if).exists(),
                "destroy removes {host_if}"
            );
            let other_if = other_link.host_interface().to_string();
            env.mock.shutdown().await;
            assert!(
                !Path::new("/sys/class/net").join(&other_if).exists(),
                "shutdown removes {other_if}"
            );
        }
        None => {
            // The documented fallback: loopback only, and only where the host cannot link.
            assert!(
                !host_supports_veth(),
                "the host supports veth pairs, yet the sandbox got no link"
            );
            assert_eq!(
                state.isolation.outbound_reach(),
                Some(OutboundReach::LoopbackOnly)
            );
            let target = host_global_ipv4().unwrap_or(Ipv4Addr::UNSPECIFIED);
            if !target.is_unspecified() {
                assert_eq!(
                    sandbox_sends_to(&env, &id, target).await,
                    None,
                    "loopback only"
                );
            }
            env.mock.shutdown().await;
        }
    }
}
