//! The Herdr integration against what Herdr 0.8.0 really does (issue: "correct against the real
//! Herdr 0.8"), one test per mismatch, with the truthful stand-in (tests/fixtures/herdr/):
//! default key bindings, `config check` failing on warnings, `HERDR_CONFIG_PATH`, the shape of
//! `plugin list --json`, restored panes without their extra environment, typing only into an
//! idle shell, reporting what the pane did, pane moves and closes, `repo_root`; and Ctrl-C at
//! any instant of a start.

#[path = "../../tests/common/mod.rs"]
mod common;
#[path = "fixtures/herdr/support.rs"]
mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use futures::TryStreamExt;
use serde_json::{json, Value};

use createos_sandbox::api::processes::Signal;
use createos_sandbox::ListSandboxes;

use support::{box_id_of, is, standin_config, Herdr, PaneProcess, Tmux};

fn setup(h: &Herdr, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = h.command("w1:p1");
    cmd.args(["-o", "json", "setup", "herdr"])
        .args(args)
        .env("XDG_DATA_HOME", h.path("data"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The stand-in's effective key table (what Herdr binds after loading the config).
fn herdr_keys(h: &Herdr, env: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new(h.path("bin").join("herdr"));
    cmd.args(["standin", "keys"])
        .env_clear()
        .envs(&h.server_env);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Mismatch 1: Herdr's defaults (close_tab on prefix+shift+x) and the user's `[keys]` are
/// bindings too; setup takes none of them and says which key it took instead.
#[tokio::test(flavor = "multi_thread")]
async fn setup_takes_no_key_that_herdr_or_the_user_already_binds() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({}));
    let out = tokio::task::block_in_place(|| setup(&h, &["--agent", "shell"], &[]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let keys = herdr_keys(&h, &[]);
    assert_eq!(
        keys["prefix+shift+x"], "keys.close_tab",
        "close_tab lost its key: {keys}"
    );
    for (field, default) in standin_config::DEFAULTS
        .iter()
        .filter(|(_, d)| !d.is_empty())
    {
        for chord in standin_config::chords(default).unwrap() {
            assert_eq!(
                keys[standin_config::label(&chord)],
                format!("keys.{field}"),
                "{field} was displaced: {keys}"
            );
        }
    }
    let added = json_of(&out)["keys_added"].clone();
    assert_eq!(added.as_array().unwrap().len(), 6, "{added}");

    // A key the user bound in [keys] is not taken either; the summary says what was taken.
    let h = Herdr::new(&env, json!({}));
    std::fs::create_dir_all(h.config_toml().parent().unwrap()).unwrap();
    std::fs::write(h.config_toml(), "[keys]\nnew_tab = \"prefix+shift+s\"\n").unwrap();
    let out = tokio::task::block_in_place(|| setup(&h, &["--agent", "shell"], &[]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json_of(&out);
    let keys = herdr_keys(&h, &[]);
    assert_eq!(keys["prefix+shift+s"], "keys.new_tab", "{keys}");
    let start = summary["keys_added"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["action"] == "start")
        .unwrap()
        .clone();
    assert_ne!(start["key"], "prefix+shift+s");
    assert!(
        keys[start["key"].as_str().unwrap()]
            .as_str()
            .unwrap()
            .starts_with("keys.command["),
        "{keys}"
    );
    let notes = summary["key_notes"].to_string();
    assert!(
        notes.contains("prefix+shift+s is keys.new_tab")
            && notes.contains(start["key"].as_str().unwrap()),
        "{notes}"
    );
    env.shutdown().await;
}

/// Mismatch 2: `herdr config check` exits 1 on any diagnostic. A warning the file already had
/// does not fail setup; a new one puts the file back; nothing suggests `reset-keys`.
#[tokio::test(flavor = "multi_thread")]
async fn setup_is_transactional_over_config_check() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({}));
    let original = "# mine\n[keys]\nbogus = 1\n";
    std::fs::create_dir_all(h.config_toml().parent().unwrap()).unwrap();
    std::fs::write(h.config_toml(), original).unwrap();
    // Herdr calls the pre-existing key a warning and `config check` exits 1 on it.
    let check = h.herdr(&["config", "check"]);
    assert_eq!(check.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&check.stdout).contains("unknown config key keys.bogus"));

    // A stricter Herdr reports a new problem once our keys are in: the file is put back.
    let fault = [(
        "HERDR_STANDIN_FAULT_CHECK",
        "keys.command[0]: rejected by this herdr",
    )];
    let out = tokio::task::block_in_place(|| setup(&h, &["--agent", "shell"], &fault));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("rejected by this herdr") && err.contains("put back"),
        "{err}"
    );
    assert!(
        !err.contains("keys.bogus"),
        "the user's own warning is not ours to report: {err}"
    );
    assert!(!err.contains("reset-keys"), "{err}");
    assert_eq!(
        std::fs::read_to_string(h.config_toml()).unwrap(),
        original,
        "not restored"
    );

    // The same warning alone: setup succeeds, reloads, and points at the backup, not reset-keys.
    let out = tokio::task::block_in_place(|| setup(&h, &["--agent", "shell"], &[]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json_of(&out);
    assert_eq!(summary["keys_added"].as_array().unwrap().len(), 6);
    let toml = std::fs::read_to_string(h.config_toml()).unwrap();
    assert!(
        toml.starts_with(original) && !toml.contains("reset-keys"),
        "{toml}"
    );
    assert!(toml.contains("config.toml.before-createos"), "{toml}");
    assert_eq!(
        std::fs::read_to_string(
            h.config_toml()
                .with_file_name("config.toml.before-createos")
        )
        .unwrap(),
        original
    );
    assert!(h.log().iter().any(|c| is(c, "server", "reload-config")));
    let human = tokio::task::block_in_place(|| {
        let mut cmd = h.command("w1:p1");
        cmd.args(["-o", "text", "setup", "herdr", "--agent", "shell"])
            .env("XDG_DATA_HOME", h.path("data"));
        cmd.output().unwrap()
    });
    assert!(human.status.success());
    assert_eq!(
        summary["boxes_pane"],
        "herdr plugin pane open --plugin createos.sandbox --entrypoint boxes"
    );
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(!text.contains("reset-keys"), "{text}");
    assert!(
        text.contains("herdr plugin pane open --plugin createos.sandbox --entrypoint boxes"),
        "{text}"
    );
    env.shutdown().await;
}

/// Mismatch 6: Herdr loads `HERDR_CONFIG_PATH` when it is set; so does setup.
#[tokio::test(flavor = "multi_thread")]
async fn setup_edits_the_file_herdr_config_path_names() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({}));
    let custom = h.path("dotfiles/herdr.toml");
    std::fs::create_dir_all(custom.parent().unwrap()).unwrap();
    std::fs::write(&custom, "[ui]\n").unwrap();
    let var = [("HERDR_CONFIG_PATH", custom.to_str().unwrap())];
    let out = tokio::task::block_in_place(|| setup(&h, &["--agent", "shell"], &var));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json_of(&out)["config_toml"], custom.to_str().unwrap());
    let text = std::fs::read_to_string(&custom).unwrap();
    assert_eq!(text.matches("createos.sandbox.").count(), 6, "{text}");
    assert!(
        !h.config_toml().exists(),
        "setup wrote a file Herdr does not load"
    );
    let keys = herdr_keys(&h, &var);
    assert_eq!(
        keys.as_object()
            .unwrap()
            .values()
            .filter(|f| f.as_str().unwrap().starts_with("keys.command["))
            .count(),
        6
    );
    env.shutdown().await;
}

/// Mismatch 4: `plugin list --json` lists `result.plugins[].plugin_id`. A plugin Herdr already
/// has is not relinked: a disabled one stays disabled.
#[tokio::test(flavor = "multi_thread")]
async fn setup_keeps_the_plugin_herdr_already_has() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({}));
    h.link_plugin();
    assert!(h
        .herdr(&["plugin", "disable", "createos.sandbox"])
        .status
        .success());
    let links_before = h.log().iter().filter(|c| is(c, "plugin", "link")).count();
    let out = tokio::task::block_in_place(|| setup(&h, &["--agent", "shell", "--no-keys"], &[]));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = json_of(&out);
    assert_eq!(summary["linked"], false, "{summary}");
    assert_eq!(summary["plugin"]["enabled"], false, "{summary}");
    assert_eq!(
        h.log().iter().filter(|c| is(c, "plugin", "link")).count(),
        links_before,
        "relinked"
    );
    let list: Value =
        serde_json::from_slice(&h.herdr(&["plugin", "list", "--json"]).stdout).unwrap();
    assert_eq!(
        list["result"]["plugins"][0]["enabled"], false,
        "setup re-enabled a disabled plugin"
    );
    env.shutdown().await;
}

/// Provision `w1:p2` from `w1:p1` in a tmux pane, then detach (Ctrl-]) back to its shell.
async fn provisioned_in_tmux(h: &Herdr) -> (String, Tmux) {
    let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    assert_eq!(started["ok"], true, "{started}");
    let pane = started["pane"].as_str().unwrap().to_string();
    let tmux = Tmux::start(h, &pane, 100, 30);
    tmux.type_line(&format!("{}; echo local-status=$?", h.typed_into(&pane)));
    tmux.wait_for(r#""action":"provision","ok":true"#).await;
    tmux.type_line("echo remote-$((6*7))");
    tmux.wait_for("remote-42").await;
    tmux.cmd(&["send-keys", "-t", &tmux.session, "C-]"]);
    tmux.wait_for("local-status=0").await;
    (pane, tmux)
}

/// Mismatches 3 and 8: after a cold restart the pane has none of its extra environment; the
/// typed line carries what `connect` needs, and `attach` reports what the pane did.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attach_after_a_cold_restart_reconnects_and_reports_it() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell", "shape": "s-1vcpu-256mb" }));
    let (pane, tmux) = provisioned_in_tmux(&h).await;
    assert!(h.pane_env(&pane).contains_key("HERDR_PLUGIN_STATE_DIR"));
    // Herdr restarts cold: the pane comes back under its id with a new shell and no extra env.
    drop(tmux);
    assert!(h.herdr(&["standin", "restart"]).status.success());
    let restored = h.pane_env(&pane);
    assert!(
        !restored.contains_key("HERDR_PLUGIN_STATE_DIR")
            && !restored.contains_key("HERDR_PLUGIN_CONFIG_DIR")
    );
    let tmux = Tmux::start(&h, &pane, 100, 30);
    tmux.type_line("echo fresh-$((1+1))");
    tmux.wait_for("fresh-2").await;

    let (_, attached) = tokio::task::block_in_place(|| h.action("attach", &pane));
    assert_eq!(attached["ok"], true, "{attached}\n{}", tmux.screen());
    assert_eq!(attached["result"], "attached", "{attached}");
    assert!(
        h.typed_into(&pane).contains("HERDR_PLUGIN_STATE_DIR="),
        "{}",
        h.typed_into(&pane)
    );
    tmux.wait_for(r#""action":"connect","ok":true"#).await;
    tmux.type_line("echo again-$((3*3))");
    tmux.wait_for("again-9").await;
    let id = box_id_of(&h, &pane);
    env.client.sandbox(&id).unwrap().destroy().await.unwrap();
    tmux.wait_for("this pane is a local shell again").await;
    env.shutdown().await;
}

/// Mismatch 8: a `connect` that fails in the pane fails the `attach` action (it used to say
/// `ok: true` whatever the pane did).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attach_fails_when_the_typed_connect_fails() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell", "shape": "s-1vcpu-256mb" }));
    let (pane, tmux) = provisioned_in_tmux(&h).await;
    // The agent is gone and the sandbox refuses to start a new one.
    let id = box_id_of(&h, &pane);
    let process = h.state()[&pane]["processId"].as_str().unwrap().to_string();
    let sandbox = env.client.sandbox(&id).unwrap();
    sandbox
        .processes()
        .get(&process)
        .await
        .unwrap()
        .signal(Signal::Kill)
        .await
        .unwrap();
    for _ in 0..400 {
        if !sandbox
            .processes()
            .get(&process)
            .await
            .unwrap()
            .details()
            .is_attachable()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    env.add_fault("POST /v1/sandboxes/*/processes status=422 count=5")
        .await;
    let (out, attached) = tokio::task::block_in_place(|| h.action("attach", &pane));
    assert_eq!(out.status.code(), Some(1), "{attached}");
    assert_eq!(attached["ok"], false, "{attached}");
    assert!(
        attached["error"]
            .as_str()
            .unwrap()
            .contains("failed in pane"),
        "{attached}"
    );
    tmux.wait_for(r#""action":"connect","ok":false"#).await;
    env.clear_faults().await;
    env.client.sandbox(&id).unwrap().destroy().await.unwrap();
    env.shutdown().await;
}

/// Mismatch 5: `attach` types only when the pane's shell is in the foreground; into a running
/// program (the agent, an editor) the line would be a prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attach_never_types_into_a_busy_pane() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell", "shape": "s-1vcpu-256mb" }));
    let (pane, tmux) = provisioned_in_tmux(&h).await;
    tmux.type_line("sleep 600");
    let info = || {
        let out = h.herdr(&["pane", "process-info", "--pane", &pane]);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()["result"]["process_info"].clone()
    };
    for _ in 0..200 {
        let i = info();
        if i["foreground_process_group_id"] != i["shell_pid"]
            && !i["foreground_processes"].as_array().unwrap().is_empty()
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let typed_before = h.log().iter().filter(|c| is(c, "pane", "run")).count();
    let (out, refused) = tokio::task::block_in_place(|| h.action("attach", &pane));
    assert_eq!(out.status.code(), Some(1), "{refused}");
    let error = refused["error"].as_str().unwrap();
    assert!(
        error.contains("sleep 600") && error.contains("nothing was typed"),
        "{refused}"
    );
    assert_eq!(
        h.log().iter().filter(|c| is(c, "pane", "run")).count(),
        typed_before,
        "typed into a busy pane"
    );
    // Back at the shell, attach types and connects.
    tmux.cmd(&["send-keys", "-t", &tmux.session, "C-c"]);
    tmux.type_line("echo idle-$((4*4))");
    tmux.wait_for("idle-16").await;
    let (_, attached) = tokio::task::block_in_place(|| h.action("attach", &pane));
    assert_eq!(attached["result"], "attached", "{attached}");
    let id = box_id_of(&h, &pane);
    env.client.sandbox(&id).unwrap().destroy().await.unwrap();
    tmux.wait_for("this pane is a local shell again").await;
    env.shutdown().await;
}

/// Mismatch 7: pane ids are `<workspace>:p<n>`. The plugin's `[[events]]` hooks re-key the
/// mapping when a pane moves (`pane.moved`, `previous_pane_id`) and drop it when it closes
/// (`pane.closed`), naming the sandbox it leaves running.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_mapping_follows_a_moved_pane_and_a_closed_pane_names_its_sandbox() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell", "shape": "s-1vcpu-256mb" }));
    h.link_plugin();
    let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
    let pane = started["pane"].as_str().unwrap().to_string();
    let mut provision = PaneProcess::spawn(&h, &pane, &format!("exec {}", h.typed_into(&pane)));
    assert_eq!(provision.result().await["ok"], true);
    let id = box_id_of(&h, &pane);

    let moved = h.herdr(&["pane", "move", &pane, "--new-workspace"]);
    assert!(
        moved.status.success(),
        "{}",
        String::from_utf8_lossy(&moved.stderr)
    );
    let to: Value = serde_json::from_slice(&moved.stdout).unwrap();
    let to = to["result"]["move_result"]["pane"]["pane_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(to, pane);
    let runs = h.hook_runs();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0]["exit_code"], 0, "{runs:?}");
    assert!(h.state().get(&pane).is_none(), "{}", h.state());
    assert_eq!(box_id_of(&h, &to), id);
    let (_, info) = tokio::task::block_in_place(|| h.action("info", &to));
    assert_eq!(info["boxId"], id.as_str(), "{info}");

    assert!(h.herdr(&["pane", "close", &to]).status.success());
    let runs = h.hook_runs();
    assert_eq!(runs.len(), 2, "{runs:?}");
    assert!(
        runs[1]["stdout"].as_str().unwrap().contains(&id),
        "the closed pane's sandbox is named: {runs:?}"
    );
    assert_eq!(h.state(), json!({}));
    provision.child.kill().await.unwrap();
    env.client.sandbox(&id).unwrap().destroy().await.unwrap();
    env.shutdown().await;
}

/// Mismatch 9: Herdr's worktree context has `repo_root` (there is no `worktree.root`).
#[tokio::test(flavor = "multi_thread")]
async fn start_finds_the_worktree_by_repo_root() {
    let env = common::start().await;
    let h = Herdr::new(&env, json!({ "agent": "shell" }));
    let elsewhere = tempfile::tempdir().unwrap();
    let context = json!({
        "focused_pane_id": "w1:p1",
        "focused_pane_cwd": elsewhere.path(),
        "worktree": { "repo_key": "k", "repo_name": "repo", "repo_root": h.repo(), "checkout_path": "", "is_linked_worktree": false },
    });
    let out = tokio::task::block_in_place(|| {
        h.command("w1:p1")
            .args(["herdr", "start"])
            .env("HERDR_PLUGIN_CONTEXT_JSON", context.to_string())
            .output()
            .unwrap()
    });
    let v = support::result_line(&out);
    assert_eq!(v["ok"], true, "{v}");
    assert!(v["box"].as_str().unwrap().starts_with("hd-repo-"), "{v}");
    env.shutdown().await;
}

async fn live_ids(env: &common::Env) -> Vec<String> {
    let all: Vec<createos_sandbox::SandboxView> = env
        .client
        .list_sandboxes(ListSandboxes::default())
        .try_collect()
        .await
        .unwrap();
    all.into_iter()
        .filter(|v| {
            !v.status.is_terminal() && v.status != createos_sandbox::SandboxStatus::Destroying
        })
        .map(|v| v.id)
        .collect()
}

/// Issue 12 point 5: Ctrl-C at any instant of a start leaves no sandbox, or names the one it
/// keeps (the provisioned one, which the pane then detaches from).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ctrl_c_at_any_instant_of_a_start_leaves_no_sandbox_or_names_it() {
    let env = common::start().await;
    let mut named = 0;
    for run in 0..10u64 {
        if run % 2 == 1 {
            // Widen the window in which the create is in flight.
            env.add_fault("POST /v1/sandboxes delay=300ms count=1")
                .await;
        }
        let h = Herdr::new(&env, json!({ "agent": "shell", "shape": "s-1vcpu-256mb" }));
        let (_, started) = tokio::task::block_in_place(|| h.action("start", "w1:p1"));
        let pane = started["pane"].as_str().unwrap().to_string();
        let line = format!("exec {}", h.typed_into(&pane));
        let mut provision = PaneProcess::spawn_with(&h, &pane, &line, Stdio::piped());
        let mut stderr = provision.child.stderr.take().unwrap();
        let wait = Duration::from_millis(rand::random::<u64>() % 2500);
        tokio::time::sleep(wait).await;
        let pid = provision.child.id().unwrap();
        let _ = Command::new("kill")
            .args(["-INT", &pid.to_string()])
            .status();
        let mut said = String::new();
        let status = tokio::time::timeout(Duration::from_secs(90), provision.child.wait())
            .await
            .expect("exits")
            .unwrap();
        use tokio::io::AsyncReadExt;
        let _ = stderr.read_to_string(&mut said).await;
        // Let a destroy settle, then every sandbox still alive must have been named.
        let mut live = live_ids(&env).await;
        for _ in 0..100 {
            if live.iter().all(|id| said.contains(id)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            live = live_ids(&env).await;
        }
        for id in &live {
            assert!(said.contains(id), "run {run} (SIGINT after {wait:?}, {status}): sandbox {id} kept but not named:\n{said}");
            named += 1;
            env.client.sandbox(id).unwrap().destroy().await.unwrap();
        }
        assert!(Path::new(&h.state_dir()).exists() || live.is_empty());
        env.clear_faults().await;
    }
    assert_eq!(env.settled_live_sandboxes().await, 0);
    eprintln!("{named} of 10 interrupted starts had provisioned their sandbox and named it");
    env.shutdown().await;
}
