//! The emulator's layering (see mocks/README.md): the shared state (`src/state.rs`) sits
//! below every route module, and only the top (`lib.rs`) assembles the router (`app.rs`).
//! A source scan: every `crate::`, `super::` and child-module path of a file is resolved
//! to the file that defines the item (through `pub use` re-exports), from `state.rs` on.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// Module path (`["sandbox", "store"]`) → source text without comments and test modules.
fn modules() -> HashMap<Vec<String>, String> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut files = Vec::new();
    walk(&src_dir(), &mut files);
    let mut out = HashMap::new();
    for file in files {
        let rel = file.strip_prefix(src_dir()).unwrap().with_extension("");
        let mut parts: Vec<String> = rel
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        if parts == ["main"] {
            continue;
        }
        if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
            parts.pop();
        }
        out.insert(parts, code_of(&std::fs::read_to_string(&file).unwrap()));
    }
    out
}

/// The text without `//` comments and without the `#[cfg(test)]` module at the end.
fn code_of(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `use` statements expanded into paths: (segments, is `pub use`, name it is visible as).
fn uses(code: &str) -> Vec<(Vec<String>, bool, String)> {
    fn expand(prefix: &str, tree: &str, out: &mut Vec<String>) {
        let Some(open) = tree.find('{') else {
            out.push(format!("{prefix}{tree}"));
            return;
        };
        let head = format!("{prefix}{}", &tree[..open]);
        let body = &tree[open + 1..tree.rfind('}').unwrap()];
        let (mut depth, mut start) = (0, 0);
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    expand(&head, &body[start..i], out);
                    start = i + 1;
                }
                _ => {}
            }
        }
        if start < body.len() {
            expand(&head, &body[start..], out);
        }
    }
    let mut out = Vec::new();
    for stmt in code.split(';') {
        let stmt = stmt.trim_start_matches(|c: char| c.is_whitespace() || c == '}' || c == '{');
        let (is_pub, tree) = if let Some(rest) = stmt.strip_prefix("pub use ") {
            (true, rest)
        } else if let Some(rest) = stmt.strip_prefix("use ") {
            (false, rest)
        } else {
            continue;
        };
        let tree: String = tree
            .replace(" as ", "@")
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let mut paths = Vec::new();
        expand("", &tree, &mut paths);
        for path in paths {
            let (path, alias) = match path.split_once('@') {
                Some((p, a)) => (p.to_string(), Some(a.to_string())),
                None => (path, None),
            };
            let segs: Vec<String> = path
                .split("::")
                .filter(|s| *s != "self")
                .map(String::from)
                .collect();
            let name = alias.unwrap_or_else(|| segs.last().cloned().unwrap_or_default());
            out.push((segs, is_pub, name));
        }
    }
    out
}

/// Child modules a file declares (`mod x;`).
fn children(code: &str) -> BTreeSet<String> {
    code.lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?
                .strip_suffix(';')
                .map(|n| n.trim().to_string())
        })
        .collect()
}

struct Crate {
    modules: HashMap<Vec<String>, String>,
}

impl Crate {
    /// An absolute path (segments after `crate`) from a path written in module `at`.
    fn absolute(&self, at: &[String], segs: &[String]) -> Option<Vec<String>> {
        let first = segs.first()?;
        if first == "crate" {
            return Some(segs[1..].to_vec());
        }
        let mut base = at.to_vec();
        let mut rest = segs;
        while rest.first().is_some_and(|s| s == "super") {
            base.pop();
            rest = &rest[1..];
        }
        if rest.len() < segs.len() || children(&self.modules[at]).contains(first) {
            base.extend(rest.iter().cloned());
            return Some(base);
        }
        None
    }

    /// The module that defines the item at `path`, through `pub use` re-exports.
    fn resolve(&self, path: &[String], depth: usize) -> Vec<String> {
        let mut k = path.len();
        while k > 0 && !self.modules.contains_key(&path[..k]) {
            k -= 1;
        }
        let module = path[..k].to_vec();
        let Some(name) = path.get(k) else {
            return module;
        };
        if depth > 8 {
            return module;
        }
        for (segs, is_pub, visible) in uses(&self.modules[&module]) {
            if is_pub && &visible == name {
                if let Some(target) = self.absolute(&module, &segs) {
                    let mut full = target;
                    full.extend(path[k + 1..].iter().cloned());
                    return self.resolve(&full, depth + 1);
                }
            }
        }
        module
    }

    /// Modules the items of module `at` come from (its own `pub use` lines excluded: a
    /// re-export is followed when somebody names it).
    fn imports(&self, at: &[String]) -> BTreeSet<Vec<String>> {
        let code = &self.modules[at];
        let mut paths: Vec<Vec<String>> = uses(code)
            .into_iter()
            .filter(|(_, is_pub, _)| !is_pub)
            .map(|(segs, ..)| segs)
            .collect();
        let bare: String = code
            .split(';')
            .filter(|s| {
                let s = s.trim_start_matches(|c: char| c.is_whitespace() || c == '}' || c == '{');
                !s.starts_with("use ") && !s.starts_with("pub use ")
            })
            .collect::<Vec<_>>()
            .join(";");
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let mut i = 0;
        let chars: Vec<char> = bare.chars().collect();
        while i < chars.len() {
            if ident(chars[i]) && (i == 0 || !(ident(chars[i - 1]) || chars[i - 1] == ':')) {
                let mut j = i;
                let sep = |j: usize| chars[j] == ':' && chars.get(j + 1) == Some(&':');
                while j < chars.len() && (ident(chars[j]) || sep(j)) {
                    j += if chars[j] == ':' { 2 } else { 1 };
                }
                let text: String = chars[i..j].iter().collect();
                if text.contains("::") {
                    paths.push(text.split("::").map(String::from).collect());
                }
                i = j.max(i + 1);
            } else {
                i += 1;
            }
        }
        paths
            .iter()
            .filter_map(|segs| self.absolute(at, segs))
            .map(|abs| self.resolve(&abs, 0))
            .filter(|m| m != at)
            .collect()
    }
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".into()
    } else {
        module.join("::")
    }
}

#[test]
fn only_the_top_imports_the_router() {
    let top = [vec![], vec!["server".to_string()]];
    for (module, code) in modules() {
        if top.contains(&module) || module == ["app"] {
            continue;
        }
        assert!(
            !code.contains("crate::app"),
            "{} imports the router (crate::app)",
            name(&module)
        );
    }
}

#[test]
fn the_state_imports_no_route_module() {
    let krate = Crate { modules: modules() };
    let state = vec!["state".to_string()];
    let mut seen = BTreeSet::from([state.clone()]);
    let mut todo = vec![(state.clone(), vec![name(&state)])];
    while let Some((module, chain)) = todo.pop() {
        for next in krate.imports(&module) {
            if !seen.insert(next.clone()) {
                continue;
            }
            let mut chain = chain.clone();
            chain.push(name(&next));
            let code = &krate.modules[&next];
            assert!(
                !code.contains("AppState")
                    && !code.contains("crate::state")
                    && !code.contains("crate::app"),
                "the shared state reaches a module that uses it: {}",
                chain.join(" -> ")
            );
            todo.push((next, chain));
        }
    }
    // The scan sees the stores the state holds (a resolver that sees nothing passes nothing).
    let stores = [
        &["sandbox", "store"][..],
        &["resources", "store"],
        &["auth"],
        &["process"],
    ];
    for store in stores {
        let store: Vec<String> = store.iter().map(|s| s.to_string()).collect();
        assert!(
            seen.contains(&store),
            "the scan does not see {} below the state",
            name(&store)
        );
    }
}

#[test]
fn route_modules_use_the_state() {
    // The other half of the layering: the routes reach the state, so the check above
    // would catch a store that imported one.
    let krate = Crate { modules: modules() };
    for route in [
        &["sandbox", "routes"][..],
        &["resources", "networks"],
        &["process", "routes"],
    ] {
        let route: Vec<String> = route.iter().map(|s| s.to_string()).collect();
        let imports = krate.imports(&route);
        let state = vec!["state".to_string()];
        assert!(
            imports.contains(&state),
            "{} does not import state",
            name(&route)
        );
    }
}
