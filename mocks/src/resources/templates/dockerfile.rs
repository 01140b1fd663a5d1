//! Dockerfile parsing and the build rules the service enforces.

use crate::envelope::ApiError;

/// Base images a template may start `FROM`.
pub const ALLOWED_FROM: &[&str] = &[
    "nodeops/sandbox:debian",
    "nodeops/sandbox:alpine",
    "nodeops/sandbox:ubuntu",
];

/// Largest Dockerfile accepted (UTF-8 bytes).
pub const MAX_DOCKERFILE_BYTES: usize = 64 * 1024;

const KNOWN: &[&str] = &[
    "FROM",
    "RUN",
    "CMD",
    "LABEL",
    "MAINTAINER",
    "EXPOSE",
    "ENV",
    "ENTRYPOINT",
    "VOLUME",
    "USER",
    "WORKDIR",
    "ARG",
    "ONBUILD",
    "STOPSIGNAL",
    "HEALTHCHECK",
    "SHELL",
    "COPY",
    "ADD",
];

/// One instruction (continuation lines joined).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    pub keyword: String,
    pub args: String,
    /// 1-based line where it starts.
    pub line: usize,
}

impl Instruction {
    pub fn text(&self) -> String {
        format!("{} {}", self.keyword, self.args).trim().to_string()
    }
}

fn invalid(msg: impl Into<String>) -> ApiError {
    ApiError::validation("dockerfile", msg)
}

/// Splits a Dockerfile into instructions (comments and blank lines dropped).
pub fn parse(src: &str) -> Result<Vec<Instruction>, ApiError> {
    let mut out = Vec::new();
    let mut pending: Option<(usize, String)> = None;
    for (idx, raw) in src.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        let trimmed = line.trim();
        if pending.is_none() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        let (start, mut acc) = pending.take().unwrap_or((idx + 1, String::new()));
        if let Some(body) = trimmed.strip_suffix('\\') {
            acc.push_str(body);
            acc.push(' ');
            pending = Some((start, acc));
            continue;
        }
        if !trimmed.starts_with('#') {
            acc.push_str(trimmed);
        }
        push_instruction(&mut out, start, &acc)?;
    }
    if let Some((start, acc)) = pending {
        push_instruction(&mut out, start, &acc)?;
    }
    Ok(out)
}

fn push_instruction(out: &mut Vec<Instruction>, line: usize, text: &str) -> Result<(), ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(());
    }
    let (kw, args) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
    let keyword = kw.to_ascii_uppercase();
    if !KNOWN.contains(&keyword.as_str()) {
        return Err(invalid(format!("line {line}: unknown instruction {kw}")));
    }
    out.push(Instruction {
        keyword,
        args: args.trim().to_string(),
        line,
    });
    Ok(())
}

/// The image of a `FROM` line (`--platform=…` flags and `AS name` stripped).
fn from_image(args: &str) -> &str {
    args.split_whitespace()
        .find(|t| !t.starts_with("--"))
        .unwrap_or("")
}

/// Applies the build rules; returns the instructions and the FROM image.
pub fn validate(src: &str) -> Result<(Vec<Instruction>, String), ApiError> {
    if src.trim().is_empty() {
        return Err(invalid("dockerfile is required"));
    }
    if src.len() > MAX_DOCKERFILE_BYTES {
        return Err(invalid(format!(
            "dockerfile exceeds {MAX_DOCKERFILE_BYTES} bytes"
        )));
    }
    let instructions = parse(src)?;
    let froms: Vec<&Instruction> = instructions
        .iter()
        .filter(|i| i.keyword == "FROM")
        .collect();
    if froms.len() != 1 {
        return Err(invalid(format!(
            "exactly one FROM is required (found {})",
            froms.len()
        )));
    }
    let first = &instructions[0];
    if first.keyword == "ARG" {
        return Err(invalid(format!(
            "line {}: ARG before FROM is not allowed",
            first.line
        )));
    }
    if first.keyword != "FROM" {
        return Err(invalid(format!(
            "line {}: the first instruction must be FROM",
            first.line
        )));
    }
    let image = from_image(&froms[0].args).to_string();
    if image.contains('$') {
        return Err(invalid("FROM must not use build arguments"));
    }
    if !ALLOWED_FROM.contains(&image.as_str()) {
        return Err(invalid(format!(
            "FROM {image:?} is not allowed; use one of {}",
            ALLOWED_FROM.join(", ")
        )));
    }
    if let Some(bad) = instructions
        .iter()
        .find(|i| i.keyword == "COPY" || i.keyword == "ADD")
    {
        return Err(invalid(format!(
            "line {}: {} is not supported (there is no build context)",
            bad.line, bad.keyword
        )));
    }
    Ok((instructions, image))
}

/// The catalog rootfs a FROM image corresponds to.
pub fn base_for(image: &str) -> &'static str {
    match image {
        "nodeops/sandbox:alpine" => "alpine:3.20",
        "nodeops/sandbox:ubuntu" => "ubuntu:26.04",
        _ => "debian:13",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_simple_file() {
        let src = "# comment\nFROM nodeops/sandbox:debian\nRUN apt-get update && \\\n    apt-get install -y jq\nENV A=b\n";
        let (ins, image) = validate(src).unwrap();
        assert_eq!(image, "nodeops/sandbox:debian");
        assert_eq!(ins.len(), 3);
        assert_eq!(ins[1].keyword, "RUN");
        assert!(ins[1].args.contains("install -y jq"));
    }

    #[test]
    fn rejects_rule_breakers() {
        assert!(validate("FROM ubuntu:22.04\n").is_err());
        assert!(validate("FROM nodeops/sandbox:debian\nFROM nodeops/sandbox:alpine\n").is_err());
        assert!(validate("ARG X=1\nFROM nodeops/sandbox:debian\n").is_err());
        assert!(validate("FROM nodeops/sandbox:debian\nCOPY . /app\n").is_err());
        assert!(validate("FROM nodeops/sandbox:debian\nBOGUS x\n").is_err());
        assert!(validate(&format!(
            "FROM nodeops/sandbox:debian\nRUN echo {}\n",
            "x".repeat(70_000)
        ))
        .is_err());
    }
}
