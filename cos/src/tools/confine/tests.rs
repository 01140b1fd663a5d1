use std::os::unix::fs::symlink;

use super::*;

/// `<tmp>/home` with a project at `home/code/proj`, a secret next to the home directory, and
/// links leading out of the project.
struct Tree {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    project: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let home = root.join("home");
    let project = home.join("code/proj");
    for dir in ["sub", ".git/hooks", "keys"] {
        std::fs::create_dir_all(project.join(dir)).unwrap();
    }
    for dir in [
        ".createos",
        ".ssh",
        ".config/opencode/skills/lint",
        ".config/gcloud/skill",
        ".aws",
        ".docker",
    ] {
        std::fs::create_dir_all(home.join(dir)).unwrap();
    }
    std::fs::write(home.join(".createos/.token"), "t").unwrap();
    std::fs::write(home.join(".config/opencode/skills/lint/SKILL.md"), "# lint").unwrap();
    std::fs::write(home.join(".config/gcloud/skill/SKILL.md"), "# x").unwrap();
    let outside = root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret"), "s").unwrap();
    symlink(outside.join("secret"), project.join("link")).unwrap();
    symlink(&outside, project.join("up")).unwrap();
    symlink(outside.join("nowhere"), project.join("dangling")).unwrap();
    symlink(home.join(".createos"), project.join("creds")).unwrap();
    Tree {
        _tmp: tmp,
        home,
        project,
        outside,
    }
}

fn agent(t: &Tree, given: &str, expect: Expect) -> Result<PathBuf, String> {
    check_agent(&t.project, Some(&t.home), "dir", Path::new(given), expect)
}

#[test]
fn agent_paths_stay_inside_the_project() {
    let t = tree();
    let p = &t.project;
    assert_eq!(
        agent(&t, "sub/new.txt", Expect::Destination).unwrap(),
        p.join("sub/new.txt")
    );
    assert_eq!(
        agent(&t, "./sub/../a/b", Expect::Destination).unwrap(),
        p.join("a/b")
    );
    assert_eq!(agent(&t, ".", Expect::Dir).unwrap(), *p);
    assert_eq!(
        agent(&t, p.join("sub").to_str().unwrap(), Expect::Dir).unwrap(),
        p.join("sub")
    );
    assert_eq!(agent(&t, "keys", Expect::Dir).unwrap(), p.join("keys"));
    let createos = t.home.join(".createos");
    let outside = t.outside.join("secret");
    let cases: [(&str, Expect, &str); 18] = [
        ("../secret", Expect::Destination, "outside the project"),
        ("..", Expect::Dir, "outside the project"),
        ("link", Expect::Existing, "outside the project"),
        ("up/secret", Expect::Existing, "outside the project"),
        ("up/new", Expect::Destination, "outside the project"),
        ("creds", Expect::Dir, "outside the project"),
        ("sub/../../x", Expect::Destination, "outside the project"),
        ("/etc", Expect::Dir, "outside the project"),
        (
            createos.to_str().unwrap(),
            Expect::Dir,
            "outside the project",
        ),
        (
            outside.to_str().unwrap(),
            Expect::Existing,
            "outside the project",
        ),
        ("dangling", Expect::Destination, "does not resolve"),
        ("missing/../../x", Expect::Destination, "`..`"),
        ("missing", Expect::Dir, "does not exist"),
        (".git", Expect::Dir, "version-control metadata"),
        (
            ".git/hooks/pre-commit",
            Expect::Destination,
            "version-control metadata",
        ),
        (".env", Expect::Destination, "deny-list"),
        ("~/.createos/.token", Expect::Destination, ".createos"),
        ("", Expect::Destination, "empty"),
    ];
    for (given, expect, needle) in cases {
        let err = agent(&t, given, expect).unwrap_err();
        assert!(err.starts_with("dir "), "{given:?}: {err}");
        assert!(err.contains(needle), "{given:?}: {err}");
    }
    assert!(agent(&t, "sub", Expect::Existing).is_ok());
    assert!(agent(&t, "sub/none", Expect::Existing)
        .unwrap_err()
        .contains("does not exist"));
}

#[test]
fn a_project_at_home_still_hides_the_credentials() {
    let t = tree();
    let at_home = |given: &str, expect| {
        check_agent(
            &t.home,
            Some(&t.home),
            "local_dir",
            Path::new(given),
            expect,
        )
    };
    for (given, needle) in [
        (".", "home directory"),
        (".createos", ".createos"),
        (".aws", "deny-list"),
        (".docker", "~/.docker"),
        (".config/opencode", "~/.config"),
        (".ssh", "deny-list"),
    ] {
        let err = at_home(given, Expect::Dir).unwrap_err();
        assert!(err.contains(needle), "{given}: {err}");
    }
    assert_eq!(at_home("code", Expect::Dir).unwrap(), t.home.join("code"));
    assert!(at_home(".createos/.token", Expect::Destination).is_err());
}

#[test]
fn people_may_name_any_place_but_home_and_credential_folders() {
    let t = tree();
    let user =
        |given: &Path, expect, force| check_user(Some(&t.home), "--dir", given, expect, force);
    assert_eq!(user(&t.outside, Expect::Dir, None).unwrap(), t.outside);
    assert_eq!(
        user(&t.project.join("sub"), Expect::Dir, None).unwrap(),
        t.project.join("sub")
    );
    assert_eq!(
        user(&t.home.join("notes.txt"), Expect::Destination, None).unwrap(),
        t.home.join("notes.txt")
    );
    assert!(user(&t.home, Expect::Dir, None)
        .unwrap_err()
        .contains("home directory"));
    assert!(user(&t.home, Expect::Destination, None)
        .unwrap_err()
        .contains("home directory"));
    assert!(user(&t.home.join("code/.."), Expect::Dir, Some(true))
        .unwrap_err()
        .contains("home directory"));
    assert!(user(t.home.parent().unwrap(), Expect::Dir, Some(true))
        .unwrap_err()
        .contains("contains your home"));
    assert!(user(Path::new("/"), Expect::Dir, Some(true))
        .unwrap_err()
        .contains("root"));
    let ssh = t.home.join(".ssh");
    assert!(!user(&ssh, Expect::Dir, None)
        .unwrap_err()
        .contains("--force"));
    assert!(user(&ssh, Expect::Dir, Some(false))
        .unwrap_err()
        .contains("pass --force"));
    assert_eq!(user(&ssh, Expect::Dir, Some(true)).unwrap(), ssh);
    for force in [None, Some(false), Some(true)] {
        let err = user(&t.home.join(".createos"), Expect::Dir, force).unwrap_err();
        assert!(
            err.contains("~/.createos") && !err.contains("--force"),
            "{err}"
        );
        assert!(user(&t.home.join(".createos/.token"), Expect::Destination, force).is_err());
    }
    assert!(
        user(&t.project.join("link"), Expect::Existing, None).is_ok(),
        "a person may follow a link"
    );
    assert!(user(&t.project.join("missing"), Expect::Dir, None)
        .unwrap_err()
        .contains("does not exist"));
}

#[test]
fn skill_directories_are_bundles_outside_credential_folders() {
    let t = tree();
    let skill = |dir: &Path| check_skill(&t.project, Some(&t.home), "skillDirs[0]", dir);
    let lint = t.home.join(".config/opencode/skills/lint");
    assert_eq!(skill(&lint).unwrap(), Some(lint.clone()));
    assert_eq!(
        skill(&t.project.join("sub")).unwrap(),
        Some(t.project.join("sub"))
    );
    assert_eq!(skill(&t.home.join("missing")).unwrap(), None);
    for (dir, needle) in [
        (t.outside.clone(), "SKILL.md"),
        (t.home.join(".config/gcloud/skill"), "deny-list"),
        (t.project.join(".git/hooks"), "version-control"),
        (t.project.join("up"), "SKILL.md"),
    ] {
        let err = skill(&dir).unwrap_err();
        assert!(
            err.starts_with("skillDirs[0] ") && err.contains(needle),
            "{}: {err}",
            dir.display()
        );
    }
    std::fs::write(t.home.join(".aws/SKILL.md"), "x").unwrap();
    assert!(skill(&t.home.join(".aws"))
        .unwrap_err()
        .contains("deny-list"));
    std::fs::write(t.home.join(".docker/SKILL.md"), "x").unwrap();
    assert!(skill(&t.home.join(".docker"))
        .unwrap_err()
        .contains("~/.docker"));
    std::fs::create_dir_all(t.home.join(".config/gh/skill")).unwrap();
    std::fs::write(t.home.join(".config/gh/skill/SKILL.md"), "x").unwrap();
    assert!(skill(&t.home.join(".config/gh/skill"))
        .unwrap_err()
        .contains("~/.config"));
    std::fs::write(t.home.join("SKILL.md"), "x").unwrap();
    assert!(skill(&t.home).unwrap_err().contains("home directory"));
}
