//! `cos attach` in a real terminal: tmux drives keystrokes and reads the screen.
//!
//! The emulator runs in this process; `cos` runs inside a tmux pane's shell, exactly as a
//! person would run it.

#[path = "../../tests/common/mod.rs"]
mod common;

use std::process::Command;
use std::time::Duration;

use createos_sandbox::CreateSandbox;

struct Tmux {
    session: String,
    socket: String,
}

impl Tmux {
    fn start(cols: u16, rows: u16) -> Tmux {
        let id = format!("cos{}", std::process::id());
        let socket = std::env::temp_dir()
            .join(format!("{id}.sock"))
            .to_string_lossy()
            .to_string();
        let t = Tmux {
            session: id,
            socket,
        };
        let status = Command::new("tmux")
            .args([
                "-S",
                &t.socket,
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-s",
                &t.session,
            ])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string(), "sh"])
            .env("PS1", "$ ")
            .env_remove("TMUX")
            .status()
            .expect("tmux runs");
        assert!(status.success());
        t.cmd(&["set-option", "-t", &t.session, "window-size", "manual"]);
        t
    }

    fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-S", &self.socket])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    fn type_line(&self, line: &str) {
        self.cmd(&["send-keys", "-t", &self.session, "-l", line]);
        self.cmd(&["send-keys", "-t", &self.session, "Enter"]);
    }

    fn keys(&self, keys: &str) {
        self.cmd(&["send-keys", "-t", &self.session, keys]);
    }

    fn screen(&self) -> String {
        self.cmd(&[
            "capture-pane",
            "-p",
            "-J",
            "-S",
            "-200",
            "-t",
            &self.session,
        ])
    }

    /// Wait (bounded) until the screen contains `needle`; returns the screen.
    async fn wait_for(&self, needle: &str) -> String {
        let mut screen = String::new();
        for _ in 0..400 {
            screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{needle:?} never appeared; screen:\n{screen}");
    }

    fn resize(&self, cols: u16, rows: u16) {
        self.cmd(&[
            "resize-window",
            "-t",
            &self.session,
            "-x",
            &cols.to_string(),
            "-y",
            &rows.to_string(),
        ]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-S", &self.socket, "kill-server"])
            .status();
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn attach_follows_the_terminal_detaches_and_reattaches() {
    let env = common::start().await;
    let sb = env
        .client
        .create_sandbox(CreateSandbox::new("s-1vcpu-256mb").name("tty"))
        .await
        .unwrap();
    let cos = format!(
        "{} --endpoint {} --api-key {}",
        env!("CARGO_BIN_EXE_cos"),
        env.base_url(),
        env.mock.api_key()
    );
    let tmux = Tmux::start(100, 30);
    tmux.type_line("stty -g > /tmp/cos-stty-before-$$; echo READY");
    tmux.wait_for("READY").await;

    // Attach to a new login shell: typed commands run remotely and their output appears.
    tmux.type_line(&format!("{cos} attach tty"));
    tmux.wait_for("started proc_").await;
    tmux.type_line("echo remote-$((6*7)) $(hostname)");
    tmux.wait_for("remote-42 tty").await;

    // The remote PTY has the pane's size, and follows a resize of the window.
    tmux.type_line("stty size");
    tmux.wait_for("30 100").await;
    tmux.resize(120, 40);
    tokio::time::sleep(Duration::from_millis(200)).await;
    tmux.type_line("stty size");
    tmux.wait_for("40 120").await;

    // Something prints while we are detached.
    tmux.type_line("(sleep 1; echo printed-while-away) &");
    tmux.keys("C-]");
    let screen = tmux.wait_for("Reattach: ").await;
    let reattach = screen
        .lines()
        .find_map(|l| l.split("Reattach: ").nth(1))
        .expect("reattach command printed")
        .trim()
        .to_string();
    assert!(reattach.starts_with("cos attach "), "{reattach}");
    tokio::time::sleep(Duration::from_millis(1500)).await;

    // The local terminal is sane again after detaching: same settings as before.
    tmux.type_line("stty -g > /tmp/cos-stty-after-$$; cmp -s /tmp/cos-stty-before-$$ /tmp/cos-stty-after-$$ && echo TTY-RESTORED");
    tmux.wait_for("TTY-RESTORED").await;

    // Reattach from where we left: what was printed meanwhile shows up.
    let args = reattach.trim_start_matches("cos ");
    tmux.type_line(&format!("{cos} {args}; echo local-status=$?"));
    tmux.wait_for("printed-while-away").await;

    // Exiting the remote shell ends the attachment with its exit code.
    tmux.type_line("exit 7");
    tmux.wait_for("local-status=7").await;
    tmux.type_line("stty -g > /tmp/cos-stty-end-$$; cmp -s /tmp/cos-stty-before-$$ /tmp/cos-stty-end-$$ && echo STILL-SANE");
    tmux.wait_for("STILL-SANE").await;

    drop(tmux);
    sb.destroy().await.unwrap();
    env.shutdown().await;
}
