// Skill discovery (the locations OpenCode reads) and confinement of what is mirrored.
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { CreateOSPlugin } from "../dist/index.js";
import { resolveOptions } from "../dist/options.js";
import { bundleOf, confineSkillDirs, configPathBundles, discoverSkillDirs, refusal } from "../dist/skills.js";
import { events, fakeEnv } from "./helpers.mjs";

function skill(dir) {
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "SKILL.md"), `---\nname: ${dir.split("/").pop()}\ndescription: test\n---\n`);
  return dir;
}

/** A home, a worktree with a nested project directory, and skills in every place. */
function layout() {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "skills-")));
  const home = join(root, "home");
  const worktree = join(root, "repo");
  const project = join(worktree, "pkg", "app");
  mkdirSync(project, { recursive: true });
  const s = {
    root,
    home,
    worktree,
    project,
    globalClaude: skill(join(home, ".claude", "skills", "g-claude")),
    globalAgents: skill(join(home, ".agents", "skills", "nested", "g-agents")),
    projectClaude: skill(join(worktree, ".claude", "skills", "p-claude")),
    projectAgents: skill(join(project, ".agents", "skills", "p-agents")),
    xdg: skill(join(root, "xdg", "opencode", "skill", "x-config")),
    projectOpencode: skill(join(worktree, "pkg", ".opencode", "skills", "p-opencode")),
    homeOpencode: skill(join(home, ".opencode", "skills", "h-opencode")),
    configDir: skill(join(root, "cfgdir", "skills", "c-dir")),
    hidden: skill(join(root, "xdg", "opencode", "skills", ".hidden", "not-loaded")),
    outside: skill(join(root, "above", ".claude", "skills", "o-claude")),
    configPath: skill(join(root, "extra", "deep", "one")),
  };
  mkdirSync(join(worktree, ".git"));
  return s;
}

test("discovery finds every location OpenCode reads, in its order, and nothing else", () => {
  const s = layout();
  const env = { XDG_CONFIG_HOME: join(s.root, "xdg"), OPENCODE_CONFIG_DIR: join(s.root, "cfgdir") };
  const found = discoverSkillDirs({ directory: s.project, worktree: s.worktree, env, home: s.home, configPaths: [join(s.root, "extra"), "missing-dir"] });
  assert.deepEqual(found, [
    s.globalClaude,
    s.globalAgents,
    s.projectAgents,
    s.projectClaude,
    s.xdg,
    s.projectOpencode,
    s.homeOpencode,
    s.configDir,
    s.configPath,
  ]);
  assert.ok(!found.includes(s.hidden), "hidden directories under config dirs are not searched");
  assert.ok(!found.includes(s.outside), "the upward walk stops at the worktree");
});

test("OpenCode's switches: external skills and project config can be turned off", () => {
  const s = layout();
  const env = { XDG_CONFIG_HOME: join(s.root, "xdg"), OPENCODE_DISABLE_EXTERNAL_SKILLS: "1", OPENCODE_DISABLE_PROJECT_CONFIG: "true" };
  const found = discoverSkillDirs({ directory: s.project, worktree: s.worktree, env, home: s.home });
  assert.deepEqual(found, [s.xdg, s.homeOpencode]);
});

test("skills.paths resolve like OpenCode's: ~/ is the home directory, relative paths start at the directory", () => {
  const s = layout();
  const rel = skill(join(s.project, "tools", "r-skill"));
  const inHome = skill(join(s.home, "mine", "m-skill"));
  assert.deepEqual(configPathBundles(["tools", "~/mine", 7, ""], s.project, s.home), [rel, inHome]);
});

test("the host's skill list gives bundle directories; virtual skills have none", () => {
  assert.equal(bundleOf({ location: "/a/b/SKILL.md" }), "/a/b");
  assert.equal(bundleOf({ path: "/a/c/SKILL.md" }), "/a/c");
  assert.equal(bundleOf({ location: "file:///a/d%20e/SKILL.md" }), "/a/d e");
  assert.equal(bundleOf({ location: "relative/SKILL.md" }), undefined);
  assert.equal(bundleOf({ location: "/a/b/README.md" }), undefined);
  assert.equal(bundleOf({ name: "builtin" }), undefined);
  assert.equal(bundleOf(null), undefined);
});

test("confinement: never the home directory, its ancestors, credential directories or a link into them", () => {
  const s = layout();
  writeFileSync(join(s.home, "SKILL.md"), "x");
  const ssh = skill(join(s.home, ".ssh", "trap"));
  const link = join(s.root, "link-to-ssh");
  symlinkSync(join(s.home, ".ssh"), link);
  writeFileSync(join(link, "SKILL.md"), "x");
  const createos = skill(join(s.home, ".createos", "x"));
  const notFile = join(s.root, "dir-skill");
  mkdirSync(join(notFile, "SKILL.md"), { recursive: true });
  assert.equal(refusal(s.home, s.home), "is the home directory or contains it");
  writeFileSync(join(s.root, "SKILL.md"), "x");
  assert.equal(refusal(s.root, s.home), "is the home directory or contains it");
  assert.equal(refusal(ssh, s.home), "lies in ~/.ssh");
  assert.equal(refusal(link, s.home), "lies in ~/.ssh", "symlinks are resolved first");
  assert.equal(refusal(createos, s.home), "lies in ~/.createos");
  assert.equal(refusal(notFile, s.home), "its SKILL.md is not a regular file");
  assert.equal(refusal(join(s.root, "nope"), s.home), "does not exist");
  assert.equal(refusal("relative/dir", s.home), "not an absolute path");
  assert.equal(refusal(s.globalClaude, s.home), undefined);
  const logged = [];
  const kept = confineSkillDirs([s.home, ssh, link, s.globalClaude, s.globalClaude, join(s.globalClaude, "."), s.projectClaude], (m) => logged.push(m), s.home);
  assert.deepEqual(kept, [s.globalClaude, s.projectClaude]);
  assert.equal(logged.length, 3, logged.join("\n"));
});

test("a bundle inside another bundle is covered by it", () => {
  const s = layout();
  const inner = skill(join(s.globalClaude, "sub", "inner"));
  assert.deepEqual(confineSkillDirs([inner, s.globalClaude], () => {}, s.home), [s.globalClaude]);
});

test("the skillDirs option: absolute paths or ~/, no `..`", () => {
  assert.deepEqual(resolveOptions({ skillDirs: ["/opt/skills/a", "/opt//b/"] }, {}).skillDirs, ["/opt/skills/a", "/opt/b"]);
  assert.match(resolveOptions({ skillDirs: ["~/s"] }, {}).skillDirs[0], /^\/.*\/s$/);
  assert.throws(() => resolveOptions({ skillDirs: "/opt/a" }, {}), /option "skillDirs": must be an array/);
  assert.throws(() => resolveOptions({ skillDirs: ["rel"] }, {}), /"rel" is not an absolute path/);
  assert.throws(() => resolveOptions({ skillDirs: ["/a/../etc"] }, {}), /contains `\.\.`/);
  assert.throws(() => resolveOptions({ skillDirs: [3] }, {}), /must be a string/);
});

test("the classic entry discovers the project's skills and passes them, with skillDirs, to cos mcp", async () => {
  const s = layout();
  const extra = skill(join(s.root, "opt", "extra-skill"));
  const { log, env } = fakeEnv({ HOME: s.home, XDG_CONFIG_HOME: join(s.root, "xdg"), OPENCODE_CONFIG_DIR: "" });
  const saved = process.env;
  process.env = env;
  let hooks;
  try {
    hooks = await CreateOSPlugin({ directory: s.project, worktree: s.worktree, client: {} }, { skillDirs: [extra] });
  } finally {
    process.env = saved;
  }
  try {
    const optionsOf = (e) => JSON.parse(e.argv[e.argv.indexOf("--options") + 1]);
    let starts = events(log).filter((e) => e.event === "start");
    const dirs = optionsOf(starts[0]).skillDirs;
    for (const d of [s.globalClaude, s.projectClaude, s.projectOpencode, s.xdg, s.homeOpencode, extra]) assert.ok(dirs.includes(d), `${d} in ${dirs}`);
    // The configuration's skills.paths arrive later (config hook): cos is restarted with them
    // as long as no call was made.
    await hooks.config({ skills: { paths: [join(s.root, "extra")] } });
    await hooks.tool.sandbox_echo.execute({ text: "x" }, { sessionID: "s", abort: new AbortController().signal, metadata() {}, ask: async () => {} });
    starts = events(log).filter((e) => e.event === "start");
    assert.equal(starts.length, 2);
    assert.ok(optionsOf(starts[1]).skillDirs.includes(s.configPath));
    // After a call, the running cos keeps its session state: no restart.
    skill(join(s.root, "late", "l-skill"));
    await hooks.config({ skills: { paths: [join(s.root, "late")] } });
    assert.equal(events(log).filter((e) => e.event === "start").length, 2);
  } finally {
    await hooks.dispose();
  }
});
