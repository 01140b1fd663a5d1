//! The conventions of `cos` as a command-line program: errors on stderr in words (and also as
//! JSON on stdout with `-o json`), text unless JSON is asked for (never switched by a pipe),
//! completions, a grouped `--help`, no warnings on a normal run, and local-only commands that
//! work signed out.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::{Command, Stdio};

use common::cli::{clean_cos, json, texts};
use createos_sandbox::CreateSandbox;
use serde_json::Value;

fn remote(env: &common::Env, home: &std::path::Path) -> Command {
    let mut cmd = clean_cos(home);
    cmd.args([
        "--endpoint",
        &env.base_url(),
        "--api-key",
        &env.mock.api_key(),
    ]);
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_go_to_stderr_in_words_and_stdout_stays_empty_when_piped() {
    let env = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let out = tokio::task::block_in_place(|| {
        remote(&env, home.path())
            .args(["exec", "nosuch", "--", "true"])
            .stdout(Stdio::piped())
            .output()
            .unwrap()
    });
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stdout, "", "nothing on stdout when it is a pipe");
    assert!(
        stderr.starts_with("error: ") && stderr.contains("nosuch"),
        "{stderr}"
    );
    assert!(
        serde_json::from_str::<Value>(stderr.trim()).is_err(),
        "the error is words, not JSON: {stderr}"
    );

    // Signed out: the same, with what to do.
    let out = clean_cos(home.path()).args(["ls"]).output().unwrap();
    let (stdout, stderr) = texts(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout, "");
    assert!(
        stderr.contains("createos login") && stderr.contains("CREATEOS_API_KEY"),
        "{stderr}"
    );
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn with_o_json_an_error_is_also_json_on_stdout() {
    let env = common::start().await;
    let home = tempfile::tempdir().unwrap();
    for how in ["flag", "env"] {
        let out = tokio::task::block_in_place(|| {
            let mut cmd = remote(&env, home.path());
            if how == "flag" {
                cmd.args(["-o", "json"]);
            } else {
                cmd.env("CREATEOS_OUTPUT", "json");
            }
            cmd.args(["exec", "nosuch", "--", "true"]).output().unwrap()
        });
        let (_, stderr) = texts(&out);
        assert_eq!(out.status.code(), Some(1), "{how}");
        let doc = json(&out);
        assert!(
            doc["error"]["code"].as_str().is_some_and(|c| !c.is_empty()),
            "{how}: {doc}"
        );
        assert!(
            doc["error"]["message"].as_str().unwrap().contains("nosuch"),
            "{how}: {doc}"
        );
        assert!(
            stderr.starts_with("error: ") && stderr.contains("nosuch"),
            "{how}: {stderr}"
        );
    }
    env.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn output_is_text_through_a_pipe_and_json_when_asked() {
    let env = common::start().await;
    let home = tempfile::tempdir().unwrap();
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("piped-web"))
        .await
        .unwrap();
    // `cos ls | cat`: a real pipe into another program.
    let cos = env!("CARGO_BIN_EXE_cos");
    let script = format!(
        "'{cos}' --endpoint '{}' --api-key '{}' ls | cat",
        env.base_url(),
        env.mock.api_key()
    );
    let out = tokio::task::block_in_place(|| {
        Command::new("sh")
            .args(["-c", &script])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home.path())
            .output()
            .unwrap()
    });
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        serde_json::from_str::<Value>(&stdout).is_err(),
        "piped output is not JSON: {stdout}"
    );
    let line = stdout
        .lines()
        .find(|l| l.contains("piped-web"))
        .unwrap_or_else(|| panic!("no row for the sandbox: {stdout}"));
    assert!(line.contains(sb.id()), "{line}");

    let out = tokio::task::block_in_place(|| {
        remote(&env, home.path())
            .args(["-o", "json", "ls"])
            .output()
            .unwrap()
    });
    let doc = json(&out);
    let text = doc.to_string();
    assert!(
        text.contains(sb.id()) && text.contains("piped-web"),
        "{text}"
    );
    let out = tokio::task::block_in_place(|| {
        remote(&env, home.path())
            .env("CREATEOS_OUTPUT", "json")
            .args(["ls"])
            .output()
            .unwrap()
    });
    assert_eq!(json(&out), doc, "CREATEOS_OUTPUT=json is -o json");
    env.shutdown().await;
}

#[test]
fn completions_for_bash_and_zsh() {
    let home = tempfile::tempdir().unwrap();
    let bash = clean_cos(home.path())
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(bash.status.success());
    let (script, _) = texts(&bash);
    assert!(
        script.contains("complete -F _cos")
            && script.contains("snapshot")
            && script.contains("run-code"),
        "{script}"
    );
    // bash loads it and registers the completion function.
    let file = home.path().join("cos.bash");
    std::fs::write(&file, &script).unwrap();
    let check = Command::new("bash")
        .args([
            "-c",
            &format!("source '{}' && complete -p cos", file.display()),
        ])
        .output()
        .unwrap();
    let (registered, err) = texts(&check);
    assert!(
        check.status.success() && registered.contains("_cos"),
        "{registered} {err}"
    );

    let zsh = clean_cos(home.path())
        .args(["completions", "zsh"])
        .output()
        .unwrap();
    assert!(zsh.status.success());
    let (script, _) = texts(&zsh);
    assert!(script.starts_with("#compdef cos"), "{script}");
    assert!(
        script.contains("_cos") && script.contains("setup") && script.contains("opencode"),
        "{script}"
    );
    for shell in ["fish", "powershell"] {
        let out = clean_cos(home.path())
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
    }
    let bad = clean_cos(home.path())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn help_opens_with_one_line_then_the_command_groups() {
    let home = tempfile::tempdir().unwrap();
    let out = clean_cos(home.path()).arg("--help").output().unwrap();
    assert!(out.status.success());
    let (help, _) = texts(&out);
    let mut lines = help.lines();
    let first = lines.next().unwrap();
    assert!(
        first.starts_with("cos: ") && first.contains("sandboxes"),
        "{first}"
    );
    assert_eq!(lines.next(), Some(""), "one line, then a blank line");
    let groups = [
        "Sandboxes:",
        "Run:",
        "Files:",
        "Processes:",
        "Agents and integrations:",
        "Account:",
        "Options:",
    ];
    let at: Vec<usize> = groups
        .iter()
        .map(|g| {
            help.find(&format!("\n{g}\n"))
                .unwrap_or_else(|| panic!("no {g}: {help}"))
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "groups out of order: {help}"
    );
    assert!(
        !help.contains("\nOther:\n") && !help.contains("\nCommands:\n"),
        "every command is in a group: {help}"
    );
    let section = |g: &str| {
        let start = help.find(&format!("\n{g}\n")).unwrap() + g.len() + 2;
        help[start..].split("\n\n").next().unwrap().to_string()
    };
    for (group, cmd) in [
        ("Sandboxes:", "create"),
        ("Run:", "exec"),
        ("Files:", "sync"),
        ("Processes:", "attach"),
        ("Agents and integrations:", "mcp"),
        ("Account:", "whoami"),
    ] {
        assert!(
            section(group)
                .lines()
                .any(|l| l.trim_start().starts_with(&format!("{cmd} "))),
            "{cmd} not under {group}: {help}"
        );
    }
    // `--version` and a subcommand's help work signed out, too.
    let out = clean_cos(home.path()).arg("--version").output().unwrap();
    assert!(
        out.status.success() && texts(&out).0.starts_with("cos "),
        "{:?}",
        texts(&out)
    );
    let out = clean_cos(home.path())
        .args(["setup", "opencode", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success() && texts(&out).0.contains("--doctor"));
}

#[test]
fn a_local_run_prints_no_warning() {
    let home = tempfile::tempdir().unwrap();
    let out = clean_cos(home.path())
        .args(["--local", "run", "--", "true"])
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("WARN") && !stderr.to_lowercase().contains("warning"),
        "a normal run warns: {stderr}"
    );
    assert!(
        !stderr.contains('\u{1b}'),
        "no colour codes when stderr is not a terminal: {stderr:?}"
    );
    assert_eq!(stdout, "");
}

#[test]
fn snapshot_lists_files_signed_out_in_an_empty_home() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(project.path().join("main.rs"), "fn main() {}\n").unwrap();
    std::fs::create_dir(project.path().join("src")).unwrap();
    std::fs::write(project.path().join("src/lib.rs"), "\n").unwrap();
    std::fs::write(project.path().join(".env"), "SECRET=1\n").unwrap();
    let out = clean_cos(home.path())
        .current_dir(project.path())
        .args(["snapshot", "--list"])
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    let listed: Vec<&str> = stdout
        .lines()
        .take_while(|l| !l.contains(" files, "))
        .collect();
    assert_eq!(listed, ["main.rs", "src/lib.rs"], "{stdout}");
    assert!(stdout.contains("2 files"), "{stdout}");
    assert_eq!(
        std::fs::read_dir(home.path()).unwrap().count(),
        0,
        "nothing written to HOME"
    );
}

#[test]
fn setup_opencode_edits_the_project_config_keeping_comments_signed_out() {
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::create_dir(project.path().join(".git")).unwrap();
    std::fs::create_dir(project.path().join("app")).unwrap();
    let original = "{\n  // the team's model\n  \"model\": \"a/b\",\n  \"plugin\": [\"other\"] /* keep */\n}\n";
    std::fs::write(project.path().join("opencode.jsonc"), original).unwrap();
    let setup = |args: &[&str]| {
        clean_cos(home.path())
            .current_dir(project.path().join("app"))
            .args(["setup", "opencode"])
            .args(args)
            .output()
            .unwrap()
    };

    let out = setup(&["--mode", "remote"]);
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("opencode.jsonc") && stdout.contains("remote"),
        "{stdout}"
    );
    assert!(
        stderr.contains("createos login"),
        "says how to sign in: {stderr}"
    );
    let edited = std::fs::read_to_string(project.path().join("opencode.jsonc")).unwrap();
    assert!(
        edited.contains("// the team's model") && edited.contains("/* keep */"),
        "{edited}"
    );
    assert!(
        edited.contains("\"@createos/opencode\"") && edited.contains("\"mode\": \"remote\""),
        "{edited}"
    );
    let backup = project.path().join("opencode.jsonc.before-createos");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), original);

    // Again: nothing changes, no second backup; -o json says so.
    let out = setup(&["-o", "json", "--mode", "remote"]);
    let doc = json(&out);
    assert_eq!(
        (doc["changed"].clone(), doc["mode"].clone()),
        (Value::Bool(false), Value::from("remote")),
        "{doc}"
    );
    assert_eq!(
        std::fs::read_to_string(project.path().join("opencode.jsonc")).unwrap(),
        edited
    );
    assert!(!project
        .path()
        .join("opencode.jsonc.before-createos.1")
        .exists());

    // --global writes the user's config (created), not the project's.
    let out = setup(&["--global", "-o", "json"]);
    let doc = json(&out);
    assert_eq!(doc["created"], true, "{doc}");
    let global = home.path().join(".config/opencode/opencode.json");
    let text = std::fs::read_to_string(&global).unwrap();
    assert!(
        text.contains("\"plugin\"") && text.contains("\"@createos/opencode\""),
        "{text}"
    );

    // --doctor: reports each check, exits 1 for what is missing (signed out, no opencode).
    let out = clean_cos(home.path())
        .current_dir(project.path())
        .env("PATH", "/nonexistent")
        .args(["-o", "json", "setup", "opencode", "--doctor"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let doc = json(&out);
    let check = |name: &str| {
        doc["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(check("sign-in")["ok"], false);
    assert!(check("sign-in")["detail"]
        .as_str()
        .unwrap()
        .contains("createos login"));
    assert_eq!(check("opencode")["ok"], false);
    assert_eq!(check("plugin entry")["ok"], true, "{doc}");
    assert!(
        texts(&out).1.contains("missing: sign-in, opencode"),
        "{}",
        texts(&out).1
    );
    // Signed in (a key in the environment) and a new enough OpenCode on PATH: all ok.
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("opencode");
    std::fs::write(&fake, "#!/bin/sh\necho 1.18.33\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = clean_cos(home.path())
        .current_dir(project.path())
        .env("PATH", &bin)
        .env("CREATEOS_API_KEY", "sk-test-not-real")
        .args(["setup", "opencode", "--doctor"])
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(
        stdout.contains("1.18.33")
            && stdout.contains("CREATEOS_API_KEY")
            && !stdout.contains("sk-test"),
        "{stdout}"
    );
}
