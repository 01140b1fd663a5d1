//! A hostile guest for the trust-boundary tests (tests/hostile_guest.rs,
//! tests/hostile_herdr.rs): a sandbox whose `tar`, `find`, `python3` and `git` are programs
//! that answer with crafted archives, listings, manifests and patches, and a host side (a Git
//! project, a directory outside it holding a secret, a home directory) to check that nothing
//! from the guest got where it must not.
//!
//! The fakes live in `<H>/bin` (`H` = `/tmp/cos-hostile-<random>`), first on the sandbox's PATH
//! (a create-time env, and `~/.bashrc` for what the guest's OpenSSH runs). They are written
//! through exec, so the sandbox's own commands see them whatever the emulator's isolation mode. `tar -c` prints `<H>/archive.tar` (and records the
//! names asked for in `<H>/requested.list`); `tar -x` is the real tar. `python3` answers the
//! file helper's `manifest` (one-shot or resident) with the real answer plus the entries of
//! `<H>/manifest.json`; everything else goes to the real helper. `find` prints crafted names before the real listing.
//! `git diff` prints `<H>/patch`, `git write-tree`/`commit-tree` print a fixed id, the rest of
//! `git` does nothing.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use createos_sandbox::api::exec::ExecRequest;
use createos_sandbox::{CreateSandbox, Sandbox};
use serde_json::Value;

use super::common;

/// What the outside directory's file holds: never to be found inside the project.
pub const SECRET: &str = "host secret 5d2c9e: must never reach the project";
/// The tree id the fake `git` answers.
pub const TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

const TAR: &str = r#"#!/bin/sh
# hostile tar: packing answers with the crafted archive; unpacking is the real tar's
H=@H@
real() ( IFS=:; for d in $PATH; do [ "$d" = "$H/bin" ] && continue; [ -x "$d/$1" ] && { printf '%s\n' "$d/$1"; exit 0; }; done; exit 1 )
create=0; file=; list=; prev=
for a in "$@"; do
  [ "$prev" = "-f" ] && file=$a
  [ "$prev" = "-T" ] && list=$a
  [ "$a" = "-c" ] && create=1
  prev=$a
done
if [ "$create" = 0 ]; then exec "$(real tar)" "$@"; fi
echo "$*" >> "$H/tar.calls"
if [ "$list" = "-" ]; then cat > "$H/requested.list"; elif [ -n "$list" ]; then cat -- "$list" > "$H/requested.list"; fi
if [ "$file" = "-" ]; then cat -- "$H/archive.tar"; else cat -- "$H/archive.tar" > "$file"; fi
"#;

const PYTHON: &str = r#"#!/bin/sh
# hostile python3: the file helper's manifests gain crafted entries (wrap.py); anything else
# is the real python3
H=@H@
real() ( IFS=:; for d in $PATH; do [ "$d" = "$H/bin" ] && continue; [ -x "$d/$1" ] && { printf '%s\n' "$d/$1"; exit 0; }; done; exit 1 )
py=$(real python3)
exec "$py" "$H/wrap.py" "$py" "$@"
"#;

/// The hostile python3's body. The helper runs as `python3 -I -c BOOTSTRAP FILE SHA [MODE]`
/// in three modes: one request on stdin, `once <base64 request>`, and `serve` (the resident
/// helper: JSON lines both ways, answers matched to requests by id). In each, an answer to a
/// `manifest` request gains the entries of `<H>/manifest.json` (when it exists).
const WRAP: &str = r#"import base64, json, os, subprocess, sys, threading
real, args = sys.argv[1], sys.argv[2:]
H = os.path.dirname(os.path.abspath(__file__))
if not (len(args) >= 5 and args[0] == "-I" and args[1] == "-c"):
    os.execv(real, [real] + args)
mode = args[5:]

def extra():
    try:
        with open(os.path.join(H, "manifest.json")) as f:
            return json.load(f)
    except OSError:
        return None

def inject(line):
    entries = extra()
    if entries is None:
        return line
    try:
        answer = json.loads(line)
    except ValueError:
        return line
    result = answer.get("result") if isinstance(answer, dict) else None
    if not (isinstance(result, dict) and isinstance(result.get("entries"), list)):
        return line
    result["entries"].extend(entries)
    result["count"] = len(result["entries"])
    with open(os.path.join(H, "python.calls"), "a") as f:
        f.write("manifest\n")
    return (json.dumps(answer) + "\n").encode()

def is_manifest(raw):
    try:
        request = json.loads(raw)
    except ValueError:
        return False
    return isinstance(request, dict) and request.get("op") == "manifest"

def once(raw, stdin):
    done = subprocess.run([real] + args, input=stdin, stdout=subprocess.PIPE)
    out = done.stdout
    if done.returncode == 0 and out.strip() and is_manifest(raw):
        out = inject(out)
    sys.stdout.buffer.write(out)
    sys.stdout.buffer.flush()
    sys.exit(done.returncode)

if mode == ["serve"]:
    child = subprocess.Popen([real] + args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    wanted, lock = set(), threading.Lock()
    def forward():
        for line in iter(sys.stdin.buffer.readline, b""):
            if is_manifest(line):
                with lock:
                    wanted.add(json.loads(line).get("id"))
            try:
                child.stdin.write(line)
                child.stdin.flush()
            except OSError:
                break
        try:
            child.stdin.close()
        except OSError:
            pass
    threading.Thread(target=forward, daemon=True).start()
    for line in iter(child.stdout.readline, b""):
        try:
            rid = json.loads(line).get("id")
        except (ValueError, AttributeError):
            rid = None
        with lock:
            mine = rid in wanted and rid is not None
        if mine:
            line = inject(line)
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    sys.exit(child.wait())
elif mode[:1] == ["once"] and len(mode) == 2:
    try:
        raw = base64.b64decode(mode[1])
    except ValueError:
        raw = b""
    once(raw, None)
elif not mode:
    raw = sys.stdin.buffer.read()
    once(raw, raw)
os.execv(real, [real] + args)
"#;

const FIND: &str = r#"#!/bin/sh
# hostile find: crafted names first
H=@H@
real() ( IFS=:; for d in $PATH; do [ "$d" = "$H/bin" ] && continue; [ -x "$d/$1" ] && { printf '%s\n' "$d/$1"; exit 0; }; done; exit 1 )
echo "$*" >> "$H/find.calls"
printf '%s\n' ../../etc/passwd /root/.ssh/id_rsa .git/hooks/post-commit 'new
line'
exec "$(real find)" "$@"
"#;

const GIT: &str = r#"#!/bin/sh
# hostile git: the patch is whatever <H>/patch holds
H=@H@
echo "$*" >> "$H/git.calls"
case "$1" in
  diff) cat -- "$H/patch" ;;
  write-tree|commit-tree) echo @TREE@ ;;
  *) exit 0 ;;
esac
"#;

/// The sandbox with the fakes first on its PATH.
pub struct Guest {
    pub sandbox: Sandbox,
    /// `H`: where the fakes and their answers live in the guest.
    pub dir: String,
}

impl Guest {
    /// A new sandbox with the fakes installed (no archive, manifest or patch served yet).
    pub async fn create(env: &common::Env) -> Guest {
        let dir = format!("/tmp/cos-hostile-{:016x}", rand::random::<u64>());
        let path =
            format!("{dir}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        let sandbox = env
            .client
            .create_sandbox(CreateSandbox::new("s-1vcpu-1gb").env("PATH", path))
            .await
            .expect("create");
        let guest = Guest { sandbox, dir };
        for (name, text) in [
            ("tar", TAR),
            ("python3", PYTHON),
            ("find", FIND),
            ("git", GIT),
        ] {
            let text = text.replace("@H@", &guest.dir).replace("@TREE@", TREE);
            guest
                .put(&format!("bin/{name}"), text.as_bytes(), true)
                .await;
        }
        guest.put("wrap.py", WRAP.as_bytes(), false).await;
        // over SSH the guest's sshd sets PATH itself; root's shell (bash) reads ~/.bashrc for
        // commands sshd runs, and the guest owns that file (`$HOME`: the sandbox's own home in
        // every isolation mode, never the host's)
        guest
            .sh(&format!(
                "printf 'export PATH=%s/bin:$PATH\\n' {} >> \"$HOME/.bashrc\"",
                guest.dir
            ))
            .await;
        let which = guest.sh("command -v tar python3 find git").await;
        assert!(
            which.lines().all(|l| l.starts_with(&guest.dir)),
            "the fakes come first on PATH: {which}"
        );
        guest
    }

    /// Write `bytes` to `<H>/<name>` through exec (base64 on stdin).
    pub async fn put(&self, name: &str, bytes: &[u8], executable: bool) {
        use base64::Engine as _;
        let encoded = base64::engine::general_purpose::STANDARD.encode(bytes);
        let script = r#"mkdir -p -- "$(dirname -- "$1")" && base64 -d > "$1" && if [ "$2" = x ]; then chmod 755 "$1"; fi"#;
        let mode = if executable { "x" } else { "-" };
        let request = ExecRequest::new("sh")
            .args(["-c", script, "sh", &format!("{}/{name}", self.dir), mode])
            .stdin(encoded);
        let out = self.sandbox.exec_with(request).await.expect("exec");
        assert!(out.success(), "writing {name}: {}", out.stderr);
    }

    /// Serve `archive` to every `tar -c`.
    pub async fn serve_archive(&self, archive: &[u8]) {
        self.put("archive.tar", archive, false).await;
    }

    /// Add `entries` (manifest entries) to every manifest answer.
    pub async fn serve_manifest(&self, entries: &Value) {
        self.put("manifest.json", entries.to_string().as_bytes(), false)
            .await;
    }

    /// Serve `patch` to `git diff`.
    pub async fn serve_patch(&self, patch: &[u8]) {
        self.put("patch", patch, false).await;
    }

    /// `sh -c script` in the guest; its stdout (it must succeed).
    pub async fn sh(&self, script: &str) -> String {
        let out = self.sandbox.exec("sh", ["-c", script]).await.expect("exec");
        assert!(out.success(), "{script}: {}", out.stderr);
        out.stdout
    }

    /// How often a fake was called for real work (`tar` packing, `python3` manifests, …).
    pub async fn calls(&self, fake: &str) -> usize {
        self.sh(&format!(
            "cat {}/{fake}.calls 2>/dev/null || true",
            self.dir
        ))
        .await
        .lines()
        .count()
    }
}

/// The host side: a Git project, a directory outside it, a home directory.
pub struct Host {
    pub tmp: tempfile::TempDir,
    pub project: PathBuf,
    pub outside: PathBuf,
    pub home: PathBuf,
}

impl Host {
    pub fn new() -> Host {
        let tmp = tempfile::tempdir().unwrap();
        let project = tmp.path().join("project");
        let outside = tmp.path().join("outside");
        let home = tmp.path().join("home");
        for d in [&project, &outside, &home] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("secret.txt"), SECRET).unwrap();
        std::fs::create_dir_all(project.join("src")).unwrap();
        std::fs::write(project.join("README.md"), "hello\n").unwrap();
        std::fs::write(project.join("src/main.rs"), "fn main() {}\n").unwrap();
        git(&project, &["init", "-q"]);
        git(&project, &["add", "-A"]);
        git(
            &project,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "init",
            ],
        );
        // untracked and ignored from here on: a local secret the guest must not overwrite
        std::fs::write(project.join(".gitignore"), ".env\n").unwrap();
        std::fs::write(project.join(".env"), "API_TOKEN=local\n").unwrap();
        Host {
            tmp,
            project,
            outside,
            home,
        }
    }

    /// Everything that must not change whatever the guest sends: the outside directory and
    /// the project's `.git`.
    pub fn guarded(&self) -> (Tree, Tree) {
        (tree(&self.outside), tree(&self.project.join(".git")))
    }

    /// Assert the outside directory and `.git` are as `before`, and no file of the project
    /// holds the outside file's content.
    pub fn assert_guarded(&self, before: &(Tree, Tree), what: &str) {
        assert_eq!(
            tree(&self.outside),
            before.0,
            "{what}: the directory outside the project changed"
        );
        assert_eq!(
            tree(&self.project.join(".git")),
            before.1,
            "{what}: .git changed"
        );
        assert_no_secret(&self.project, what);
        let hooks: Vec<_> = std::fs::read_dir(self.project.join(".git/hooks"))
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name())
                    .filter(|n| !n.to_string_lossy().ends_with(".sample"))
                    .collect()
            })
            .unwrap_or_default();
        assert!(hooks.is_empty(), "{what}: hooks appeared: {hooks:?}");
    }

    /// `cos -o json <args>` against `env`, HOME here.
    pub fn cos(&self, env: &common::Env, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_cos"))
            .args([
                "--endpoint",
                &env.base_url(),
                "--api-key",
                &env.mock.api_key(),
                "-o",
                "json",
            ])
            .args(args)
            .env_remove("CREATEOS_API_KEY")
            .env_remove("CREATEOS_SANDBOX_BASE_URL")
            .env_remove("XDG_STATE_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env("HOME", &self.home)
            .output()
            .expect("cos runs")
    }
}

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What stands at a path, links not followed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Node {
    Dir,
    File { content: Vec<u8>, mode: u32 },
    Link(PathBuf),
    Other(u32),
}

pub type Tree = BTreeMap<PathBuf, Node>;

/// Everything below `root` (relative paths), never following a link.
pub fn tree(root: &Path) -> Tree {
    let mut out = Tree::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(root.join(&rel)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = rel.join(entry.file_name());
            let full = root.join(&path);
            let meta = std::fs::symlink_metadata(&full).unwrap();
            let node = if meta.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&full).unwrap())
            } else if meta.is_dir() {
                todo.push(path.clone());
                Node::Dir
            } else if meta.is_file() {
                Node::File {
                    content: std::fs::read(&full).unwrap(),
                    mode: meta.permissions().mode() & 0o7777,
                }
            } else {
                Node::Other(meta.mode())
            };
            out.insert(path, node);
        }
    }
    out
}

/// The paths whose node differs between `before` and `after` (added, removed or changed).
pub fn changed(before: &Tree, after: &Tree) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = before.keys().chain(after.keys()).cloned().collect();
    paths.sort();
    paths.dedup();
    paths
        .into_iter()
        .filter(|p| before.get(p) != after.get(p))
        .collect()
}

/// No file below `root` holds [`SECRET`].
pub fn assert_no_secret(root: &Path, what: &str) {
    for (path, node) in tree(root) {
        if let Node::File { content, .. } = node {
            let hit = content
                .windows(SECRET.len())
                .any(|w| w == SECRET.as_bytes());
            assert!(
                !hit,
                "{what}: {} holds a host file's content",
                path.display()
            );
        }
    }
}

/// One entry of a crafted archive; names and link targets are written raw into the header.
pub struct Raw<'a> {
    pub name: &'a [u8],
    pub kind: tar::EntryType,
    pub mode: u32,
    pub data: &'a [u8],
    pub link: &'a [u8],
}

pub fn raw<'a>(
    name: &'a str,
    kind: tar::EntryType,
    mode: u32,
    data: &'a str,
    link: &'a str,
) -> Raw<'a> {
    Raw {
        name: name.as_bytes(),
        kind,
        mode,
        data: data.as_bytes(),
        link: link.as_bytes(),
    }
}

/// A tar of `entries`, names unchecked (as a hostile guest would write them).
pub fn archive(entries: &[Raw<'_>]) -> Vec<u8> {
    let mut out = tar::Builder::new(Vec::new());
    for e in entries {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(e.kind);
        header.set_mode(e.mode);
        header.set_mtime(1_700_000_000);
        header.set_size(e.data.len() as u64);
        {
            let old = header.as_old_mut();
            old.name = [0; 100];
            old.name[..e.name.len()].copy_from_slice(e.name);
            old.linkname = [0; 100];
            old.linkname[..e.link.len()].copy_from_slice(e.link);
        }
        header.set_cksum();
        out.append(&header, e.data).unwrap();
    }
    out.into_inner().unwrap()
}

/// Every case of the unpacker's rules in one archive, with what each must come to when all of
/// it is asked for: `(shown name, refusal code)`, and the benign entries that must arrive.
pub fn every_case(
    outside: &Path,
) -> (
    Vec<u8>,
    Vec<(&'static str, &'static str)>,
    Vec<&'static str>,
) {
    use tar::EntryType::{
        Block, Char, Directory as D, Fifo, Link as H, Regular as F, Symlink as S,
    };
    let out = outside.to_str().unwrap();
    let entries = [
        raw("/abs-escape.txt", F, 0o644, "x", ""),
        raw("../escape.txt", F, 0o644, "x", ""),
        raw("sub/../../escape2.txt", F, 0o644, "x", ""),
        // the issue's case: a link out, then a hard link through it
        raw("sec", S, 0o777, "", out),
        raw("sec/planted.txt", F, 0o644, "x", ""),
        raw("copied.txt", H, 0o644, "", "sec/secret.txt"),
        raw("rel-out", S, 0o777, "", "../../outside/secret.txt"),
        raw("hl-passwd", H, 0o644, "", "/etc/passwd"),
        raw("hl-up", H, 0o644, "", "../outside/secret.txt"),
        raw(
            ".git/hooks/post-commit",
            F,
            0o755,
            "#!/bin/sh\ntouch /tmp/pwned\n",
            "",
        ),
        raw(
            ".git/config",
            F,
            0o644,
            "[core]\n\tfsmonitor = touch /tmp/pwned\n",
            "",
        ),
        raw("vendor/.hg/hgrc", F, 0o644, "[hooks]\n", ""),
        raw(".svn/entries", F, 0o644, "x", ""),
        raw(".jj/repo/store", F, 0o644, "x", ""),
        raw(".env", F, 0o644, "API_TOKEN=guest\n", ""),
        raw("app/.env.local", F, 0o644, "X=1\n", ""),
        raw("keys/id_rsa", F, 0o600, "key", ""),
        raw(".ssh/authorized_keys", F, 0o644, "ssh-ed25519 AAAA", ""),
        raw("credentials.json", F, 0o644, "{}", ""),
        raw(".createos/.token", F, 0o600, "token", ""),
        raw("dev-null", Char, 0o666, "", ""),
        raw("disk", Block, 0o660, "", ""),
        raw("fifo", Fifo, 0o644, "", ""),
        raw("suid-bin", F, 0o4755, "x", ""),
        raw("sgid-bin", F, 0o2755, "x", ""),
        raw("sticky/", D, 0o1777, "", ""),
        raw("to-git", S, 0o777, "", ".git/config"),
        raw("chain-a", S, 0o777, "", "chain-b/c/../.."),
        raw("d/", D, 0o755, "", ""),
        raw("chain-b", S, 0o777, "", "d/.."),
        // benign
        raw("ok.txt", F, 0o644, "ok\n", ""),
        raw("dir/ok2.txt", F, 0o644, "ok2\n", ""),
        raw("good-link", S, 0o777, "", "ok.txt"),
        raw("ok-copy.txt", H, 0o644, "", "ok.txt"),
        raw("new\nline.txt", F, 0o644, "newline\n", ""),
        raw("exec.sh", F, 0o755, "#!/bin/sh\n", ""),
        raw("wanted.txt", F, 0o644, "from the guest\n", ""),
    ];
    let refused = vec![
        ("/abs-escape.txt", "absolute-path"),
        ("../escape.txt", "parent-dir"),
        ("sub/../../escape2.txt", "parent-dir"),
        ("sec", "symlink-leaves"),
        ("sec/planted.txt", "through-symlink"),
        ("copied.txt", "hard-link"),
        ("rel-out", "symlink-leaves"),
        ("hl-passwd", "hard-link"),
        ("hl-up", "hard-link"),
        (".git/hooks/post-commit", "protected"),
        (".git/config", "protected"),
        ("vendor/.hg/hgrc", "protected"),
        (".svn/entries", "protected"),
        (".jj/repo/store", "protected"),
        (".env", "protected"),
        ("app/.env.local", "protected"),
        ("keys/id_rsa", "protected"),
        (".ssh/authorized_keys", "protected"),
        ("credentials.json", "protected"),
        (".createos/.token", "protected"),
        ("dev-null", "special-file"),
        ("disk", "special-file"),
        ("fifo", "special-file"),
        ("suid-bin", "set-id-bits"),
        ("sgid-bin", "set-id-bits"),
        ("sticky/", "set-id-bits"),
        ("to-git", "symlink-to-protected"),
        ("chain-a", "symlink-leaves"),
    ];
    let arrive = vec![
        "ok.txt",
        "dir/ok2.txt",
        "good-link",
        "ok-copy.txt",
        "new\nline.txt",
        "exec.sh",
        "wanted.txt",
        "chain-b",
        "d",
    ];
    (archive(&entries), refused, arrive)
}

/// `(path, reason)` of each refusal in a JSON list of refused entries.
pub fn refusals(list: &Value) -> Vec<(String, String)> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list of refusals: {list}"))
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_string(),
                r["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// The expected refusals as owned pairs, sorted (the names shown escaped, as the client does).
pub fn expected(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = list
        .iter()
        .map(|(p, r)| (p.escape_debug().to_string(), r.to_string()))
        .collect();
    out.sort();
    out
}

/// `list` sorted.
pub fn sorted(mut list: Vec<(String, String)>) -> Vec<(String, String)> {
    list.sort();
    list
}

pub use common::cli::ok;
