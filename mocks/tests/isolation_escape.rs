//! A sandbox is a boundary on this machine: escapes tried from inside one fail and leave
//! the host unchanged; the files API sees only the sandbox's own view; `/etc`, `/usr/local`
//! and `/opt` are private per sandbox and copied by a fork; the emulator's environment
//! (its API key above all) never reaches a sandbox. Where the host cannot isolate, the
//! emulator must say so in its report instead.

mod common;

use std::path::Path;

use common::{start_with, Env, KEY};
use createos_mock::MockConfig;
use serde_json::json;

/// An environment variable of this test process that must never be seen in a sandbox.
const SECRET_VAR: &str = "COS_ESCAPE_TEST_SECRET";

/// The emulator, with a secret in the test process's own environment (the in-process
/// emulator of `cos --local` shares it) and its key passed as `CREATEOS_API_KEY` too.
async fn boundary() -> Option<Env> {
    // SAFETY: set once before any sandbox starts; every test sets the same values.
    unsafe {
        std::env::set_var(SECRET_VAR, "s3cr3t-value-7d1f");
        std::env::set_var("CREATEOS_API_KEY", KEY);
    }
    let env = start_with(MockConfig::default()).await;
    let report = env.mock.isolation();
    let served: serde_json::Value = env
        .http
        .get(env.url("/_mock/isolation"))
        .header("X-Api-Key", KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        served,
        serde_json::to_value(&report).unwrap(),
        "GET /_mock/isolation reports the same object"
    );
    if report.isolated {
        assert!(report.missing.is_empty(), "{report:?}");
        return Some(env);
    }
    // Not a boundary here: the report must say what is missing.
    let root = nix::unistd::Uid::effective().is_root();
    let bwrap = Path::new("/usr/bin/bwrap").exists();
    assert!(
        !(root && bwrap && cfg!(target_os = "linux")),
        "root with bubblewrap on Linux must isolate: {report:?}"
    );
    assert!(!report.missing.is_empty(), "{report:?}");
    env.mock.shutdown().await;
    None
}

fn token() -> String {
    format!("{}-{}", std::process::id(), rand_suffix())
}

fn rand_suffix() -> u64 {
    use std::time::{SystemTime, UNIX_EPOCH};
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        % 1_000_000_007
}

#[tokio::test(flavor = "multi_thread")]
async fn escapes_from_inside_fail_and_the_host_is_unchanged() {
    let Some(env) = boundary().await else { return };
    let id = env.create(json!({})).await;
    let tok = token();
    let state_dir = env.mock.state().state_dir.display().to_string();

    // Every host directory outside the private layers is read-only for the sandbox.
    let targets = [
        "/",
        "/usr",
        "/usr/bin",
        "/bin",
        "/sbin",
        "/lib",
        "/var",
        "/var/lib",
        "/var/log",
        "/srv",
        "/boot",
        "/mnt",
        "/media",
        "/sys",
        state_dir.as_str(),
    ];
    for dir in targets {
        let file = format!("{dir}/cos-escape-{tok}");
        let (_, _, code) = env.sh(&id, &format!("echo x > '{file}'")).await;
        assert_ne!(code, 0, "writing {file} inside the sandbox must fail");
        assert!(!Path::new(&file).exists(), "{file} appeared on the host");
    }
    // Its own layers are writable, and nothing reaches the host.
    for dir in [
        "/root",
        "/work",
        "/workspace",
        "/tmp",
        "/home",
        "/var/tmp",
        "/etc",
        "/usr/local/bin",
        "/opt",
        "/run",
    ] {
        let file = format!("{dir}/cos-escape-{tok}");
        let (_, err, code) = env
            .sh(&id, &format!("echo x > '{file}' && cat '{file}'"))
            .await;
        assert_eq!(code, 0, "writing {file} inside the sandbox: {err}");
        assert!(!Path::new(&file).exists(), "{file} appeared on the host");
    }

    // The sandbox's root is not the host's root.
    let (map, _, _) = env.sh(&id, "cat /proc/self/uid_map; id -u").await;
    let fields: Vec<&str> = map.split_whitespace().collect();
    assert_eq!(fields[0], "0", "{map}");
    assert_ne!(
        fields[1], "0",
        "sandbox uid 0 must not be host uid 0: {map}"
    );
    assert_eq!(fields.last(), Some(&"0"));
    // Host-root-only files are unreadable; /etc/shadow is the sandbox's own (accounts locked).
    let host_shadow = std::fs::read_to_string("/etc/shadow").unwrap_or_default();
    let (shadow, _, _) = env.sh(&id, "cat /etc/shadow").await;
    assert!(
        shadow
            .lines()
            .all(|l| l.split(':').nth(1).is_some_and(|h| h == "*" || h == "!")),
        "{shadow}"
    );
    if host_shadow
        .lines()
        .any(|l| l.split(':').nth(1).is_some_and(|h| h.starts_with('$')))
    {
        assert_ne!(shadow, host_shadow);
    }
    let secret_dir = format!("/var/lib/cos-escape-{tok}");
    std::fs::create_dir_all(&secret_dir).unwrap();
    std::fs::write(format!("{secret_dir}/secret"), "host-only").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            format!("{secret_dir}/secret"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
    }
    let (out, _, code) = env.sh(&id, &format!("cat {secret_dir}/secret")).await;
    assert!(
        code != 0 && !out.contains("host-only"),
        "a root-only host file was read: {out}"
    );

    // Host processes are invisible: no signal, no ptrace, no environ.
    let mut host_child = std::process::Command::new("sleep")
        .arg("300")
        .spawn()
        .unwrap();
    let host_pid = host_child.id();
    let (_, _, code) = env.sh(&id, &format!("kill -9 {host_pid}")).await;
    assert_ne!(code, 0);
    assert!(
        host_child.try_wait().unwrap().is_none(),
        "a host process was killed from the sandbox"
    );
    let (procs, _, _) = env.sh(&id, "ls /proc | grep -c '^[0-9]'").await;
    assert!(
        procs.trim().parse::<u32>().unwrap() < 10,
        "the sandbox sees {procs} processes"
    );
    let (_, _, code) = env
        .sh(&id, &format!("test -e /proc/{}", std::process::id()))
        .await;
    assert_ne!(code, 0, "the emulator's process is visible");
    let ptrace = format!(
        "import ctypes, os, subprocess, sys\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         child = subprocess.Popen(['sleep', '30'])\n\
         for pid in (child.pid, {host_pid}):\n\
         \x20   r = libc.ptrace(16, pid, 0, 0)\n\
         \x20   print(r, ctypes.get_errno())\n\
         child.kill()\n"
    );
    let (out, err, _) = env
        .sh(
            &id,
            &format!(
                "python3 -c \"$(printf '%s' '{}' | base64 -d)\"",
                base64(&ptrace)
            ),
        )
        .await;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}{err}");
    assert_eq!(
        lines[0],
        format!("-1 {}", nix::libc::EPERM),
        "ptrace attach to a sandbox process: {out}"
    );
    assert!(
        lines[1].starts_with("-1 "),
        "ptrace attach to a host process: {out}"
    );
    let _ = host_child.kill();
    let _ = host_child.wait();

    // mount, kernel modules and keyrings are refused.
    let (_, _, code) = env.sh(&id, "mount -t tmpfs none /mnt").await;
    assert_ne!(code, 0, "mount succeeded");
    let calls = format!(
        "import ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         print(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None), ctypes.get_errno())\n\
         print(libc.syscall({}, b'user', b'k', b'v', 1, -4), ctypes.get_errno())\n\
         print(libc.syscall({}, -1, b'', 0), ctypes.get_errno())\n",
        nix::libc::SYS_add_key,
        nix::libc::SYS_finit_module
    );
    let (out, err, _) = env
        .sh(
            &id,
            &format!(
                "python3 -c \"$(printf '%s' '{}' | base64 -d)\"",
                base64(&calls)
            ),
        )
        .await;
    let eperm = format!("-1 {}", nix::libc::EPERM);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        vec![eperm.as_str(); 3],
        "mount / add_key / finit_module: {out}{err}"
    );

    // The emulator's environment never reaches the sandbox.
    let (all, _, _) = env.sh(&id, "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; cat /proc/*/cmdline 2>/dev/null").await;
    assert!(
        !all.contains(SECRET_VAR) && !all.contains("s3cr3t-value"),
        "the emulator's environment leaked: {all}"
    );
    assert!(!all.contains(KEY), "the API key reached the sandbox");
    let (found, _, _) = env.sh(&id, &format!("grep -rl '{KEY}' /root /home /etc /tmp /var/tmp /opt /usr/local 2>/dev/null | head -1")).await;
    assert_eq!(
        found.trim(),
        "",
        "the API key is in a file the sandbox reads"
    );

    std::fs::remove_dir_all(&secret_dir).unwrap();
    env.mock.shutdown().await;
}

fn base64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test(flavor = "multi_thread")]
async fn the_files_api_sees_only_the_sandbox_view() {
    let Some(env) = boundary().await else { return };
    let id = env.create(json!({})).await;
    let tok = token();
    // The sandbox's own /etc/shadow, never the host's.
    let r = env
        .get(&format!("/v1/sandboxes/{id}/files?path=/etc/shadow"))
        .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(
        r.text
            .lines()
            .all(|l| l.split(':').nth(1).is_some_and(|h| h == "*" || h == "!")),
        "{}",
        r.text
    );
    // A link inside the sandbox resolves inside it.
    env.sh(&id, "ln -s /etc/shadow /root/shadow-link").await;
    let linked = env
        .get(&format!("/v1/sandboxes/{id}/files?path=/root/shadow-link"))
        .await;
    assert_eq!(linked.text, r.text);
    // A host file only the host's root may read is refused.
    let secret_dir = format!("/var/lib/cos-files-{tok}");
    std::fs::create_dir_all(&secret_dir).unwrap();
    let secret = format!("{secret_dir}/secret");
    std::fs::write(&secret, "host-only").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let r = env
        .get(&format!("/v1/sandboxes/{id}/files?path={secret}"))
        .await;
    assert_ne!(
        r.status, 200,
        "a root-only host file was served: {}",
        r.text
    );
    assert!(!r.text.contains("host-only"));
    // Writes land in the sandbox, never on the host; the read-only host root is refused.
    let put = env
        .http
        .put(env.url(&format!("/v1/sandboxes/{id}/files?path=/etc/cos-{tok}")))
        .header("X-Api-Key", KEY)
        .body("mine")
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    assert!(!Path::new(&format!("/etc/cos-{tok}")).exists());
    let (seen, _, _) = env
        .sh(
            &id,
            &format!("cat /etc/cos-{tok}; stat -c %u /etc/cos-{tok}"),
        )
        .await;
    assert_eq!(seen, "mine0\n", "the upload is the sandbox root's file");
    let put = env
        .http
        .put(env.url(&format!("/v1/sandboxes/{id}/files?path=/usr/bin/cos-{tok}")))
        .header("X-Api-Key", KEY)
        .body("x")
        .send()
        .await
        .unwrap();
    assert_ne!(put.status(), 200);
    assert!(!Path::new(&format!("/usr/bin/cos-{tok}")).exists());
    std::fs::remove_dir_all(&secret_dir).unwrap();
    env.mock.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn layers_are_private_per_sandbox_and_a_fork_copies_them() {
    let Some(env) = boundary().await else { return };
    let a = env.create(json!({})).await;
    let b = env.create(json!({})).await;
    let tok = token();
    let files = [
        format!("/usr/local/bin/cos-{tok}"),
        format!("/etc/cos-{tok}"),
        format!("/opt/cos-{tok}/tool"),
    ];
    for f in &files {
        let (_, err, code) = env
            .sh(
                &a,
                &format!("mkdir -p \"$(dirname {f})\" && echo from-a > {f}"),
            )
            .await;
        assert_eq!(code, 0, "{f}: {err}");
    }
    // An existing host file of /etc can be edited in place; the host's stays as it was.
    let host_hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    let (_, err, code) = env
        .sh(&a, "echo '10.9.9.9 cos-layer-test' >> /etc/hosts")
        .await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read_to_string("/etc/hosts").unwrap(), host_hosts);
    for f in &files {
        assert!(!Path::new(f).exists(), "{f} is on the host");
        let (_, _, code) = env.sh(&b, &format!("test -e {f}")).await;
        assert_ne!(code, 0, "{f} leaked into another sandbox");
    }
    assert_eq!(
        env.post_empty(&format!("/v1/sandboxes/{a}/pause"))
            .await
            .status,
        202
    );
    env.wait_status(&a, "paused").await;
    let forked = env
        .post(&format!("/v1/sandboxes/{a}/fork"), json!({}))
        .await;
    assert_eq!(forked.status, 200, "{}", forked.text);
    let c = forked.data()["id"].as_str().unwrap().to_string();
    env.wait_status(&c, "running").await;
    for f in &files {
        let (out, err, _) = env.sh(&c, &format!("cat {f}")).await;
        assert_eq!(out, "from-a\n", "the fork sees {f}: {err}");
    }
    let (hosts, _, _) = env.sh(&c, "grep -c cos-layer-test /etc/hosts").await;
    assert_eq!(hosts.trim(), "1");
    // The fork's files are its root's: it changes them, and the parent keeps its own.
    let (_, err, code) = env.sh(&c, &format!("echo from-c > {}", files[1])).await;
    assert_eq!(code, 0, "{err}");
    env.post_empty(&format!("/v1/sandboxes/{a}/resume")).await;
    env.wait_status(&a, "running").await;
    assert_eq!(env.sh(&a, &format!("cat {}", files[1])).await.0, "from-a\n");
    env.mock.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sandboxes_get_only_the_envs_given_at_create() {
    let Some(env) = boundary().await else { return };
    let id = env.create(json!({"envs": {"GIVEN": "yes"}})).await;
    let (out, _, _) = env.sh(&id, "env").await;
    assert!(out.lines().any(|l| l == "GIVEN=yes"), "{out}");
    assert!(
        !out.contains(SECRET_VAR) && !out.contains("CREATEOS_API_KEY"),
        "{out}"
    );
    let names: Vec<&str> = out.lines().filter_map(|l| l.split('=').next()).collect();
    for name in &names {
        assert!(
            [
                "PATH", "HOSTNAME", "TERM", "LANG", "USER", "SHELL", "HOME", "GIVEN", "PWD",
                "SHLVL", "_"
            ]
            .contains(name),
            "unexpected variable {name} in {out}"
        );
    }
    env.mock.shutdown().await;
}
