//! `cos herdr <action>` and `cos setup herdr` end to end: the real binary against the emulator,
//! with the Herdr 0.8.0 stand-in on PATH (tests/fixtures/herdr/standin.rs) that logs what the
//! plugin asks of Herdr and answers as Herdr does (schema-checked). The lines the plugin types
//! into panes (`herdr pane run`) are run here the way a pane's shell would run them, with the
//! pane's environment as the stand-in has it.

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "fixtures/herdr/support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::{json, Value};

use cos::herdr::provision::find_by_name;
use cos::herdr::state::PENDING_TTL;
use createos_sandbox::CreateSandbox;

use support::{box_id_of, is, mode_of, result_line, sh_in_box, Herdr, PaneProcess, Tmux};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn start_provision_apply_pause_sync_and_delete() {
    let env = common::start().await;
    let h = Herdr::new(
        &env,
        json!({ "agent": "shell", "shape": "s-1vcpu-256mb", "autoPause": "45m" }),
    );

    // start: reserve, split right with focus, name the pane, type the provision line into it.
    let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    assert_eq!(started["ok"], true, "{started}");
    assert_eq!(started["provisioning"], true);
    assert_eq!(started["agent"], "shell");
    let pane = started["pane"].as_str().unwrap().to_string();
    assert_eq!(pane, "w1:p2");
    let split = h
        .log()
        .into_iter()
        .find(|c| is(c, "pane", "split"))
        .unwrap();
    assert_eq!(split[2], "w1:p1");
    assert!(
        split.windows(2).any(|w| w == ["--direction", "right"]),
        "{split:?}"
    );
    assert!(split.contains(&"--focus".to_string()));
    assert!(
        split
            .iter()
            .any(|a| a.starts_with("HERDR_PLUGIN_STATE_DIR=")),
        "{split:?}"
    );
    assert!(
        !split.iter().any(|a| a.contains(&h.api_key)),
        "the API key never reaches Herdr: {split:?}"
    );
    assert!(h
        .log()
        .iter()
        .any(|c| is(c, "pane", "rename") && c[3].contains("starting in hd-repo-")));
    let line = h.typed_into(&pane);
    assert!(line.contains(" herdr provision "), "{line}");
    assert!(!line.contains(&h.api_key));

    // A second start while this one provisions is refused (it would bill a second sandbox).
    let (out, again) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        again["error"]
            .as_str()
            .unwrap()
            .contains("already in progress"),
        "{again}"
    );
    let (_, from_new) = tokio::task::block_in_place(|| h.action("start", &pane));
    assert_eq!(
        from_new["ok"], false,
        "the opened pane is covered by the reservation too"
    );

    // The pane runs provision: sandbox, upload, baseline, agent PTY, mapping, then attaches.
    let mut provision = PaneProcess::spawn(&h, &pane, &line);
    let provisioned = provision.result().await;
    assert_eq!(provisioned["action"], "provision");
    assert_eq!(provisioned["ok"], true, "{provisioned}");
    let id = box_id_of(&h, &pane);
    assert_eq!(provisioned["boxId"], id.as_str());
    assert_eq!(h.pending(), json!({}), "the reservation is released");
    assert_eq!(h.state()[&pane]["agent"], "shell");
    assert_eq!(h.state()[&pane]["remote"], "/workspace");
    let view = env.client.get_sandbox(&id).await.unwrap().view();
    assert_eq!(view.auto_pause_after_seconds, Some(2700));
    assert!(h
        .log()
        .iter()
        .any(|c| is(c, "pane", "rename")
            && c[3] == format!("Shell @ {}", view.name.clone().unwrap())));

    // What was uploaded: the tracked .env and the key stayed home, the example went.
    let listing = sh_in_box(&env, &id, "cd /workspace && ls -A && git log --format=%s").await;
    assert!(
        listing.contains("README.md") && listing.contains(".env.example"),
        "{listing}"
    );
    assert!(
        !listing.lines().any(|l| l == ".env"),
        "tracked .env was uploaded: {listing}"
    );
    assert!(!listing.contains("server.pem"), "{listing}");
    assert!(listing.contains("herdr-baseline"));

    // info
    let (out, info) = tokio::task::block_in_place(|| h.action("info", &pane));
    assert_eq!(info["status"], "running", "{info}");
    assert_eq!(info["boxId"], id.as_str());
    assert!(String::from_utf8_lossy(&out.stdout).contains("/workspace"));

    // apply: the sandbox's edits land locally once; the second apply has nothing new.
    sh_in_box(&env, &id, "cd /workspace && echo 'from the sandbox' >> README.md && mkdir -p docs && echo new > docs/added.txt && git rm -q src/main.rs").await;
    let (_, applied) = tokio::task::block_in_place(|| h.action("apply", &pane));
    assert_eq!(applied["result"], "applied", "{applied}");
    assert!(applied["bytes"].as_u64().unwrap() > 0);
    assert_eq!(
        std::fs::read_to_string(h.repo().join("README.md")).unwrap(),
        "hello\nfrom the sandbox\n"
    );
    assert_eq!(
        std::fs::read_to_string(h.repo().join("docs/added.txt")).unwrap(),
        "new\n"
    );
    assert!(!h.repo().join("src/main.rs").exists());
    assert_eq!(
        std::fs::read_to_string(h.repo().join(".env")).unwrap(),
        "API_TOKEN=do-not-upload\n",
        "local secrets untouched"
    );
    let (_, second) = tokio::task::block_in_place(|| h.action("apply", &pane));
    assert_eq!(second["result"], "no-changes", "{second}");
    // Only newer work travels next time, and the agent's own commits are included.
    sh_in_box(&env, &id, "cd /workspace && echo more >> docs/added.txt && git add -A && git -c user.name=a -c user.email=a@a commit -qm agent").await;
    let (_, third) = tokio::task::block_in_place(|| h.action("apply", &pane));
    assert_eq!(third["result"], "applied", "{third}");
    assert_eq!(
        std::fs::read_to_string(h.repo().join("docs/added.txt")).unwrap(),
        "new\nmore\n"
    );

    // A patch that does not apply leaves the local worktree as it was, and is offered again.
    std::fs::write(h.repo().join("docs/added.txt"), "edited locally\n").unwrap();
    sh_in_box(&env, &id, "cd /workspace && echo again >> docs/added.txt").await;
    let (out, conflict) = tokio::task::block_in_place(|| h.action("apply", &pane));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        conflict["error"].as_str().unwrap().contains("not changed"),
        "{conflict}"
    );
    assert_eq!(
        std::fs::read_to_string(h.repo().join("docs/added.txt")).unwrap(),
        "edited locally\n"
    );
    std::fs::write(h.repo().join("docs/added.txt"), "new\nmore\n").unwrap();
    let (_, retried) = tokio::task::block_in_place(|| h.action("apply", &pane));
    assert_eq!(retried["result"], "applied", "{retried}");
    assert_eq!(
        std::fs::read_to_string(h.repo().join("docs/added.txt")).unwrap(),
        "new\nmore\nagain\n"
    );

    // pause / resume
    let (_, paused) = tokio::task::block_in_place(|| h.action("pause", &pane));
    assert_eq!(paused["status"], "paused", "{paused}");
    let (_, resumed) = tokio::task::block_in_place(|| h.action("resume", &pane));
    assert_eq!(resumed["status"], "running", "{resumed}");

    // sync opens a small pane below running a two-way watch sync.
    let (_, synced) = tokio::task::block_in_place(|| h.action("sync", &pane));
    assert_eq!(synced["ok"], true, "{synced}");
    let sync_pane = synced["pane"].as_str().unwrap().to_string();
    let split = h
        .log()
        .into_iter()
        .rfind(|c| is(c, "pane", "split"))
        .unwrap();
    assert_eq!(split[2], pane);
    assert!(
        split.windows(2).any(|w| w == ["--direction", "down"])
            && split.windows(2).any(|w| w == ["--ratio", "0.25"])
    );
    assert!(split.contains(&"--no-focus".to_string()));
    let sync_line = h.typed_into(&sync_pane);
    assert!(
        sync_line.contains(&format!(" sync {id} --local "))
            && sync_line.contains("--mode two-way --watch"),
        "{sync_line}"
    );
    assert!(
        sync_line.contains("--exclude .git --exclude node_modules"),
        "{sync_line}"
    );

    // delete: the first invocation only arms it.
    let (_, armed) = tokio::task::block_in_place(|| h.action("delete", &pane));
    assert_eq!(armed["result"], "confirmation-required", "{armed}");
    assert_eq!(
        env.client
            .get_sandbox(&id)
            .await
            .unwrap()
            .status()
            .to_string(),
        "running"
    );
    let (_, deleted) = tokio::task::block_in_place(|| h.action("delete", &pane));
    assert_eq!(deleted["result"], "deleted", "{deleted}");
    assert_eq!(h.state(), json!({}));
    // The attached pane leaves cleanly instead of hanging on a dead sandbox.
    assert_eq!(provision.exit_code().await, Some(0));
    assert_eq!(env.settled_live_sandboxes().await, 0);
    let (out, gone) = tokio::task::block_in_place(|| h.action("info", &pane));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        gone["error"]
            .as_str()
            .unwrap()
            .contains("no CreateOS sandbox"),
        "{gone}"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failed_agent_install_destroys_its_sandbox() {
    let env = common::start().await;
    let h = Herdr::new(
        &env,
        json!({ "agent": "claude-code", "shape": "s-1vcpu-256mb" }),
    );
    // The install is the first managed process; the emulator refuses it.
    env.add_fault("POST /v1/sandboxes/*/processes status=422 count=1")
        .await;
    let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    assert_eq!(started["ok"], true, "{started}");
    let split = h
        .log()
        .into_iter()
        .find(|c| is(c, "pane", "split"))
        .unwrap();
    // Herdr reads HERDR_AGENT from the foreground process: the typed line sets it for cos, the
    // pane's shell does not carry it (an idle shell is not the agent).
    assert!(
        !split.iter().any(|a| a.starts_with("HERDR_AGENT=")),
        "{split:?}"
    );
    let pane = started["pane"].as_str().unwrap().to_string();
    assert!(
        h.typed_into(&pane).starts_with("env HERDR_AGENT=claude "),
        "{}",
        h.typed_into(&pane)
    );
    let mut provision = PaneProcess::spawn(&h, &pane, &h.typed_into(&pane));
    let failed = provision.result().await;
    assert_eq!(failed["action"], "provision");
    assert_eq!(failed["ok"], false, "{failed}");
    assert_eq!(provision.exit_code().await, Some(1));
    let stats = env.stats().await;
    assert_eq!(stats["handled"]["createSandbox"], 1);
    assert_eq!(stats["handled"]["destroySandbox"], 1, "{stats}");
    assert_eq!(env.settled_live_sandboxes().await, 0);
    assert_eq!(h.state(), json!({}));
    assert_eq!(
        h.pending(),
        json!({}),
        "the reservation is released on failure too"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn closing_the_pane_while_provisioning_destroys_the_sandbox() {
    let env = common::start().await;
    let h = Herdr::new(
        &env,
        json!({ "agent": "claude-code", "shape": "s-1vcpu-256mb" }),
    );
    // Hold the install (the first managed process) long enough to interrupt it.
    env.add_fault("POST /v1/sandboxes/*/processes delay=5s count=1")
        .await;
    let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    let pane = started["pane"].as_str().unwrap().to_string();
    let mut provision = PaneProcess::spawn(&h, &pane, &format!("exec {}", h.typed_into(&pane)));
    for _ in 0..1200 {
        if env.requests("createProcess").await >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(env.handled("createSandbox").await, 1);
    let pid = provision.child.id().unwrap();
    assert!(Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    let failed = provision.result().await;
    assert_eq!(failed["ok"], false, "{failed}");
    assert_eq!(provision.exit_code().await, Some(1));
    assert_eq!(
        env.settled_live_sandboxes().await,
        0,
        "the interrupted start left its sandbox"
    );
    assert_eq!(h.state(), json!({}));
    assert_eq!(h.pending(), json!({}));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_injected_remote_root_is_refused_before_anything_is_created() {
    let env = common::start().await;
    let evil = "'; touch /tmp/PWNED; #";
    let marker_before = Path::new("/tmp/PWNED").exists();
    let h = Herdr::new(&env, json!({ "agent": "shell", "remoteRoot": evil }));
    let (_, refused) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    assert_eq!(refused["ok"], false);
    assert!(
        refused["error"].as_str().unwrap().contains("remoteRoot"),
        "{refused}"
    );
    assert!(
        !h.log().iter().any(|c| c[0] == "pane"),
        "no pane was opened: {:?}",
        h.log()
    );
    assert_eq!(h.pending(), json!({}));

    // The provision step checks again: a hand-made spec is refused before the create.
    let spec = json!({
        "sourcePane": "w1:p1", "pane": "w1:p9", "box": "hd-evil-000000", "local": h.repo(), "agent": "shell",
        "shape": "s-1vcpu-256mb", "autoPauseSecs": 1800, "remoteRoot": evil, "egress": [], "excludes": []
    });
    use base64::Engine as _;
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(spec.to_string());
    let out = tokio::task::block_in_place(|| {
        h.command("w1:p9")
            .args(["herdr", "provision", &encoded])
            .output()
            .unwrap()
    });
    let v = result_line(&out);
    assert!(v["error"].as_str().unwrap().contains("remoteRoot"), "{v}");
    assert_eq!(env.requests("createSandbox").await, 0);
    assert_eq!(env.stats().await["sandboxes_created"], 0);
    assert_eq!(Path::new("/tmp/PWNED").exists(), marker_before);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn every_failure_still_prints_one_result_line() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell" }));

    // Unknown action: exit 2, with a line.
    let (out, v) = tokio::task::block_in_place(|| h.action("explode", "w1:p1"));
    assert_eq!(out.status.code(), Some(2));
    assert!(v["error"].as_str().unwrap().contains("unknown action"));
    // The action name may come from Herdr's environment instead of argv.
    let out = tokio::task::block_in_place(|| {
        h.command("w1:p1")
            .arg("herdr")
            .env("HERDR_PLUGIN_ACTION_ID", "createos.sandbox.info")
            .output()
            .unwrap()
    });
    let v = result_line(&out);
    assert_eq!(v["action"], "info");
    assert!(
        v["error"].as_str().unwrap().contains("no CreateOS sandbox"),
        "{v}"
    );

    // Not launched by Herdr.
    let out = tokio::task::block_in_place(|| {
        h.command("w1:p1")
            .args(["herdr", "info"])
            .env_remove("HERDR_PLUGIN_STATE_DIR")
            .output()
            .unwrap()
    });
    assert!(result_line(&out)["error"]
        .as_str()
        .unwrap()
        .contains("HERDR_PLUGIN_STATE_DIR"));

    // No credentials at all (the client cannot even be built).
    let out = tokio::task::block_in_place(|| {
        h.command("w1:p1")
            .args(["herdr", "apply"])
            .env_remove("CREATEOS_API_KEY")
            .output()
            .unwrap()
    });
    let v = result_line(&out);
    assert_eq!(v["action"], "apply");
    assert!(!v["error"].as_str().unwrap().contains(&h.api_key));

    // A config typo is an error, not a silently ignored setting.
    std::fs::write(
        h.config_dir().join("config.json"),
        r#"{"agent":"shell","remoteRot":"/x"}"#,
    )
    .unwrap();
    let (_, v) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    assert!(v["error"].as_str().unwrap().contains("remoteRot"), "{v}");

    // A corrupt state file is moved aside and the action fails; it is never read as empty.
    let corrupt = b"{\"w1:p2\": {\"box\": \"hd-x\", \"boxId\": ";
    std::fs::write(h.state_dir().join("panes.json"), corrupt).unwrap();
    let (out, v) = tokio::task::block_in_place(|| h.action("delete", "w1:p2"));
    assert!(v["error"].as_str().unwrap().contains("moved aside"), "{v}");
    assert!(!h.state_dir().join("panes.json").exists());
    let aside: Vec<PathBuf> = std::fs::read_dir(h.state_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("panes.json.corrupt-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert_eq!(std::fs::read(&aside[0]).unwrap(), corrupt);
    assert!(String::from_utf8_lossy(&out.stderr).contains("moved aside"));

    // A pane that Herdr cannot type into: the opened pane is closed and the start undone.
    std::fs::write(h.config_dir().join("config.json"), r#"{"agent":"shell"}"#).unwrap();
    let out = tokio::task::block_in_place(|| {
        h.command("w1:p1")
            .args(["herdr", "start"])
            .env("HERDR_STANDIN_FAIL_RUN", "1")
            .output()
            .unwrap()
    });
    let v = result_line(&out);
    assert!(v["error"].as_str().unwrap().contains("pane run"), "{v}");
    assert!(
        h.log().iter().any(|c| is(c, "pane", "close")),
        "{:?}",
        h.log()
    );
    assert_eq!(h.pending(), json!({}));
    // Failures are shown in Herdr, not only in its plugin log.
    assert!(h.log().iter().any(|c| is(c, "notification", "show")));
    assert_eq!(env.requests("createSandbox").await, 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn setup_writes_config_0600_and_keys_once() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({}));
    std::fs::remove_file(h.config_dir().join("config.json")).unwrap();
    let xdg = h.path("xdg");
    let original = "[ui]\ntheme = \"dark\"\n";
    let config_toml = h.config_toml();
    std::fs::create_dir_all(config_toml.parent().unwrap()).unwrap();
    std::fs::write(&config_toml, original).unwrap();
    let setup = |args: &[&str]| {
        let mut cmd = h.command("w1:p1");
        cmd.args(["-o", "json", "setup", "herdr"]).args(args);
        cmd.env("XDG_DATA_HOME", xdg.join("data"));
        cmd.output().unwrap()
    };
    let json_of = |out: &Output| -> Value {
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "{e}: {}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };

    // --doctor checks and changes nothing.
    let out = tokio::task::block_in_place(|| setup(&["--doctor"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doctor = json_of(&out);
    let names: Vec<&str> = doctor["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["herdr", "git", "createos session"]);
    assert!(
        doctor["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true),
        "{doctor}"
    );
    assert!(!h.config_dir().join("config.json").exists());
    assert_eq!(std::fs::read_to_string(&config_toml).unwrap(), original);
    let out = tokio::task::block_in_place(|| {
        let mut cmd = h.command("w1:p1");
        cmd.args(["-o", "json", "setup", "herdr", "--doctor"])
            .env("HERDR_STANDIN_VERSION", "0.7.1");
        cmd.output().unwrap()
    });
    assert_eq!(out.status.code(), Some(1));
    assert!(json_of(&out)["checks"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("older than"));

    // Bad flags are refused before anything is written.
    let out = tokio::task::block_in_place(|| setup(&["--agent", "gemini"]));
    assert!(!out.status.success());
    assert!(!h.config_dir().join("config.json").exists());

    let out =
        tokio::task::block_in_place(|| setup(&["--agent", "codex", "--shape", "s-4vcpu-8gb"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = json_of(&out);
    assert_eq!(first["keys_added"].as_array().unwrap().len(), 6, "{first}");
    assert_eq!(first["config_written"], true);
    let config_json = h.config_dir().join("config.json");
    assert_eq!(mode_of(&config_json), 0o600);
    let config: Value = serde_json::from_slice(&std::fs::read(&config_json).unwrap()).unwrap();
    assert_eq!(config["agent"], "codex");
    assert_eq!(config["shape"], "s-4vcpu-8gb");
    assert_eq!(config["remoteRoot"], "/workspace");
    let toml = std::fs::read_to_string(&config_toml).unwrap();
    assert!(toml.starts_with(original));
    for action in ["start", "attach", "sync", "apply", "info", "delete"] {
        assert_eq!(
            toml.matches(&format!("command = \"createos.sandbox.{action}\""))
                .count(),
            1,
            "{toml}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(config_toml.with_file_name("config.toml.before-createos")).unwrap(),
        original
    );
    // The plugin directory holds the manifest and a launcher with this cos's absolute path.
    let plugin_dir = PathBuf::from(first["plugin_dir"].as_str().unwrap());
    assert!(plugin_dir.starts_with(xdg.join("data")));
    let launcher = std::fs::read_to_string(plugin_dir.join("run.sh")).unwrap();
    assert!(launcher.contains(env!("CARGO_BIN_EXE_cos")), "{launcher}");
    assert!(
        std::fs::read_to_string(plugin_dir.join("herdr-plugin.toml"))
            .unwrap()
            .contains("id = \"createos.sandbox\"")
    );
    let links = h
        .log()
        .into_iter()
        .filter(|c| is(c, "plugin", "link"))
        .count();
    assert_eq!(links, 1);
    assert!(h.log().iter().any(|c| is(c, "config", "check")));

    // Twice: nothing added, the config kept, no second link.
    std::fs::write(&config_json, r#"{"agent":"pi"}"#).unwrap();
    let out = tokio::task::block_in_place(|| setup(&["--agent", "codex"]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let second = json_of(&out);
    assert_eq!(second["keys_added"], json!([]));
    assert_eq!(second["config_written"], false);
    assert_eq!(
        std::fs::read_to_string(&config_json).unwrap(),
        r#"{"agent":"pi"}"#
    );
    assert_eq!(std::fs::read_to_string(&config_toml).unwrap(), toml);
    assert_eq!(
        h.log()
            .into_iter()
            .filter(|c| is(c, "plugin", "link"))
            .count(),
        1
    );
    // --force replaces the config; --no-keys leaves config.toml alone.
    let out =
        tokio::task::block_in_place(|| setup(&["--agent", "opencode", "--force", "--no-keys"]));
    assert!(out.status.success());
    let config: Value = serde_json::from_slice(&std::fs::read(&config_json).unwrap()).unwrap();
    assert_eq!(config["agent"], "opencode");
    assert_eq!(mode_of(&config_json), 0o600);
    env.shutdown().await;
}

#[test]
fn build_script_writes_a_launcher_with_the_absolute_cos_path() {
    let dir = tempfile::tempdir().unwrap();
    let plugin = dir.path().join("plugin dir");
    std::fs::create_dir_all(&plugin).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../integrations/herdr");
    for f in ["herdr-plugin.toml", "build.sh"] {
        std::fs::copy(src.join(f), plugin.join(f)).unwrap();
    }
    let manifest = std::fs::read_to_string(plugin.join("herdr-plugin.toml")).unwrap();
    for id in [
        "start", "attach", "sync", "apply", "pause", "resume", "info", "delete", "boxes",
    ] {
        assert!(manifest.contains(&format!("id = \"{id}\"")), "{id} missing");
        assert!(
            manifest.contains(&format!("command = [\"sh\", \"run.sh\", \"{id}\"]")),
            "{id} command missing"
        );
    }
    // As Herdr runs it: a bare argv from the plugin directory, cos only reachable via COS_BIN.
    let out = Command::new("sh")
        .arg("build.sh")
        .current_dir(&plugin)
        .env("COS_BIN", env!("CARGO_BIN_EXE_cos"))
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let launcher = std::fs::read_to_string(plugin.join("run.sh")).unwrap();
    assert!(
        launcher.contains(&format!("COS_BIN='{}'", env!("CARGO_BIN_EXE_cos"))),
        "{launcher}"
    );
    // The launcher works from anywhere, with no PATH: an unknown action still reports.
    let out = Command::new("/bin/sh")
        .arg(plugin.join("run.sh"))
        .arg("nope")
        .env_clear()
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(result_line(&out)["ok"], false);
    // Without any cos the build fails loudly instead of writing a broken launcher.
    std::fs::remove_file(plugin.join("run.sh")).unwrap();
    let out = Command::new("sh")
        .arg("build.sh")
        .current_dir(&plugin)
        .env_remove("COS_BIN")
        .env("HOME", dir.path())
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    if ![
        "/usr/local/bin/cos",
        "/usr/bin/cos",
        "/bin/cos",
        "/opt/homebrew/bin/cos",
    ]
    .iter()
    .any(|p| Path::new(p).exists())
    {
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("cos was not found"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!plugin.join("run.sh").exists());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attach_in_a_terminal_follows_resizes_restarts_and_leaves_when_deleted() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell", "shape": "s-1vcpu-256mb" }));
    let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    let pane = started["pane"].as_str().unwrap().to_string();
    let tmux = Tmux::start(&h, &pane, 100, 30);

    // The provision line runs in the pane; the agent's PTY has the pane's size from the start.
    tmux.type_line(&format!("{}; echo local-status=$?", h.typed_into(&pane)));
    tmux.wait_for(r#""action":"provision","ok":true"#).await;
    tmux.type_line("echo remote-$((6*7)); stty size");
    tmux.wait_for("remote-42").await;
    tmux.wait_for("30 100").await;
    // Ctrl-] detaches and gives the pane back.
    tmux.cmd(&["send-keys", "-t", &tmux.session, "C-]"]);
    tmux.wait_for("local-status=0").await;

    // The attach action types `cos herdr connect` into the pane's idle shell (the stand-in types
    // into this tmux pane as Herdr would) and reports what the pane did: a native attach.
    tmux.clear();
    let (_, attached) = tokio::task::block_in_place(|| h.action("attach", &pane));
    assert_eq!(attached["ok"], true, "{attached}");
    assert_eq!(attached["result"], "attached", "{attached}");
    let process = h.state()[&pane]["processId"].as_str().unwrap().to_string();
    assert_eq!(attached["processId"], process.as_str());
    let connect = h.typed_into(&pane);
    assert!(
        connect.contains(&format!(" herdr connect {pane} ")),
        "{connect}"
    );
    tmux.wait_for(r#""action":"connect","ok":true"#).await;
    tmux.type_line("echo back-$((2*21))");
    tmux.wait_for("back-42").await;
    // While attached, a second attach types nothing: the pane runs our attach already.
    let typed_before = h.log().len();
    let (_, again) = tokio::task::block_in_place(|| h.action("attach", &pane));
    assert_eq!(again["result"], "already-attached", "{again}");
    assert!(
        !h.log()[typed_before..].iter().any(|c| is(c, "pane", "run")),
        "typed into an attached pane"
    );
    // It follows the pane's size.
    tmux.resize(120, 40);
    let mut followed = false;
    for _ in 0..100 {
        tmux.type_line("stty size");
        tokio::time::sleep(Duration::from_millis(200)).await;
        if tmux.screen().contains("40 120") {
            followed = true;
            break;
        }
    }
    assert!(
        followed,
        "the remote PTY never took the new size:\n{}",
        tmux.screen()
    );

    // The agent exits: the pane says so; attach restarts it at the pane's size.
    tmux.clear();
    tmux.type_line("exit 3");
    tmux.wait_for("exited; the attach action restarts it").await;
    tmux.type_line("echo local-status=$?");
    tmux.wait_for("local-status=3").await;
    tmux.clear();
    let (_, restarted) = tokio::task::block_in_place(|| h.action("attach", &pane));
    assert_eq!(restarted["ok"], true, "{restarted}");
    assert_eq!(restarted["restarted"], true, "{restarted}");
    tmux.wait_for("restarted Shell").await;
    tmux.type_line("stty size");
    tmux.wait_for("40 120").await;
    assert_ne!(
        h.state()[&pane]["processId"].as_str().unwrap(),
        process,
        "the mapping follows the new process"
    );

    // Deleting the sandbox from Herdr ends the attachment cleanly: no frozen pane.
    let (_, armed) = tokio::task::block_in_place(|| h.action("delete", &pane));
    assert_eq!(armed["result"], "confirmation-required");
    let (_, deleted) = tokio::task::block_in_place(|| h.action("delete", &pane));
    assert_eq!(deleted["result"], "deleted", "{deleted}");
    tmux.wait_for("was deleted; this pane is a local shell again")
        .await;
    tmux.type_line("echo local-status=$?");
    tmux.wait_for("local-status=0").await;
    tmux.type_line("echo local-$((5*5))");
    tmux.wait_for("local-25").await;
    drop(tmux);
    assert_eq!(env.settled_live_sandboxes().await, 0);
    env.shutdown().await;
}

/// `start` from `w1:p1` and run the typed provision line; returns the agent's pane, the
/// sandbox id and the pane process (attached to the agent).
async fn provisioned(h: &Herdr) -> (String, String, PaneProcess) {
    let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    assert_eq!(started["ok"], true, "{started}");
    let pane = started["pane"].as_str().unwrap().to_string();
    // `exec`: the pane process is `cos` itself, so a test can kill it.
    let mut provision = PaneProcess::spawn(h, &pane, &format!("exec {}", h.typed_into(&pane)));
    let provisioned = provision.result().await;
    assert_eq!(provisioned["ok"], true, "{provisioned}");
    let id = box_id_of(h, &pane);
    (pane, id, provision)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn settings_creation_would_refuse_are_refused_before_anything_is_opened() {
    let env = common::start().await;
    for (config, field) in [
        (json!({ "agent": "shell", "autoPause": "2d" }), "autoPause"),
        (json!({ "agent": "shell", "shape": "huge" }), "shape"),
    ] {
        let h = Herdr::new(&env, config);
        let (out, refused) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
        assert_eq!(out.status.code(), Some(1));
        assert!(
            refused["error"].as_str().unwrap().contains(field),
            "{refused}"
        );
        assert!(
            !h.log().iter().any(|c| c[0] == "pane"),
            "no pane was opened: {:?}",
            h.log()
        );
        assert_eq!(h.pending(), json!({}));
    }
    assert_eq!(env.requests("createSandbox").await, 0);
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provisioning_that_outlasts_the_reservation_ttl_keeps_it() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell", "shape": "s-1vcpu-256mb" }));
    // Hold the agent's start (the first managed process) so provisioning is still running.
    env.add_fault("POST /v1/sandboxes/*/processes delay=4s count=1")
        .await;
    let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    let pane = started["pane"].as_str().unwrap().to_string();
    // The reservation was made longer ago than the TTL: this provisioning has been running
    // for a long time (a slow upload or install).
    let state = h.state_dir().join("pending.json");
    let mut pending = h.pending();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let old = now_ms - PENDING_TTL.as_millis() as u64 - 60_000;
    pending["w1:p1"]["createdAt"] = json!(old);
    std::fs::write(&state, serde_json::to_vec(&pending).unwrap()).unwrap();

    let mut provision = PaneProcess::spawn(&h, &pane, &h.typed_into(&pane));
    for _ in 0..1200 {
        if env.requests("createProcess").await >= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        env.handled("createProcess").await,
        0,
        "provisioning is still running"
    );
    let (out, again) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    assert_eq!(
        out.status.code(),
        Some(1),
        "a second start was accepted while the first provisions: {again}"
    );
    assert!(
        again["error"]
            .as_str()
            .unwrap()
            .contains("already in progress"),
        "{again}"
    );
    assert_eq!(
        h.log().iter().filter(|c| is(c, "pane", "split")).count(),
        1,
        "no second pane"
    );

    let provisioned = provision.result().await;
    assert_eq!(provisioned["ok"], true, "{provisioned}");
    assert_eq!(h.pending(), json!({}), "released once provisioned");
    let id = box_id_of(&h, &pane);
    env.client.sandbox(&id).unwrap().destroy().await.unwrap();
    assert_eq!(provision.exit_code().await, Some(0));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn info_fails_on_errors_other_than_missing_and_pause_forgets_deleted_sandboxes() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell", "shape": "s-1vcpu-256mb" }));
    let (pane, id, mut provision) = provisioned(&h).await;
    // No pane watches the sandbox from here on (the attached pane reads the sandbox too, and
    // would notice the deletion below on its own).
    provision.child.kill().await.unwrap();

    // A refused read is a failure, not "missing"; the mapping stays.
    env.add_fault(&format!("GET /v1/sandboxes/{id} status=401 count=1"))
        .await;
    let (out, info) = tokio::task::block_in_place(|| h.action("info", &pane));
    assert_eq!(out.status.code(), Some(1), "{info}");
    assert_eq!(info["ok"], false, "{info}");
    assert_eq!(h.state()[&pane]["boxId"], id.as_str());
    let (_, info) = tokio::task::block_in_place(|| h.action("info", &pane));
    assert_eq!(info["status"], "running", "{info}");

    // Deleted elsewhere: pause says so and drops the mapping.
    env.client.sandbox(&id).unwrap().destroy().await.unwrap();
    let (out, paused) = tokio::task::block_in_place(|| h.action("pause", &pane));
    assert_eq!(out.status.code(), Some(1));
    assert!(
        paused["error"]
            .as_str()
            .unwrap()
            .contains("no longer exists"),
        "{paused}"
    );
    assert_eq!(h.state(), json!({}));
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_interrupted_create_is_found_even_when_it_registers_late() {
    let env = common::start().await;
    let name = "hd-late-0a1b2c";
    let client = env.client.clone();
    let looking = tokio::spawn(async move {
        find_by_name(
            &client,
            name,
            Duration::from_secs(30),
            Duration::from_millis(50),
        )
        .await
    });
    // The server registers the sandbox only after the first look.
    while env.requests("listSandboxes").await < 1 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let created = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name(name))
        .await
        .unwrap();
    let found = tokio::time::timeout(Duration::from_secs(60), looking)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        found.expect("the late sandbox was found").id(),
        created.id()
    );
    created.destroy().await.unwrap();
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cancelled_apply_removes_the_guest_patch_file() {
    let env = common::start().await;
    let sandbox = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb"))
        .await
        .unwrap();
    let id = sandbox.id().to_string();
    sh_in_box(
        &env,
        &id,
        "mkdir -p /workspace && cd /workspace && git init -q && echo a > f && git add -A && \
         git -c user.name=t -c user.email=t@t commit -qm base && git update-ref refs/herdr/base HEAD && echo b >> f",
    )
    .await;
    let local = tempfile::tempdir().unwrap();
    // The patch download hangs; the action is dropped (cancelled) while it waits.
    env.add_fault("GET /v1/sandboxes/*/files delay=30s count=1")
        .await;
    tokio::select! {
        r = cos::herdr::apply::apply(&sandbox, "/workspace", local.path()) => panic!("apply finished: {r:?}"),
        _ = async {
            while env.requests("downloadFile").await < 1 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        } => {}
    }
    let mut left = String::from("(not checked)");
    for _ in 0..200 {
        left = sh_in_box(&env, &id, "ls -a /tmp | grep herdr-createos || true").await;
        if left.trim().is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left.trim(), "", "the patch file stayed in the sandbox");
    sandbox.destroy().await.unwrap();
    env.shutdown().await;
}
