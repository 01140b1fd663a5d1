//! `run_code`: a snippet written to `/work/main.<ext>` of a fresh sandbox and run by the
//! language's toolchain (plugins.md §2.7), optional stdin, destroyed afterwards.

use std::str::FromStr;

use tokio_util::sync::CancellationToken;

use super::error::JobError;
use super::options::{JobOptions, JobProgress, WORK_DIR};
use super::run::{run_job, JobPlan, JobResult};
use crate::error::Error;
use crate::Client;

/// Largest code or stdin accepted (2 MiB each).
pub const MAX_CODE_BYTES: usize = 2 << 20;

/// A language `run_code` knows: how its file is named and how it is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    /// Python 3: `python3 main.py`.
    Python,
    /// JavaScript (CommonJS by extension default): `node main.js`.
    JavaScript,
    /// ES module: `node main.mjs`.
    Mjs,
    /// CommonJS: `node main.cjs`.
    Cjs,
    /// TypeScript: `bun main.ts`.
    TypeScript,
    /// Shell: `bash main.sh`.
    Shell,
    /// Go: `go run main.go`.
    Go,
    /// Ruby: `ruby main.rb`.
    Ruby,
    /// C: `gcc -o main main.c && ./main`.
    C,
    /// C++: `g++ -o main main.cpp && ./main`.
    Cpp,
    /// Rust: `rustc -o main main.rs && ./main`.
    Rust,
}

impl Language {
    /// Every language, in the table's order.
    pub const ALL: [Language; 11] = [
        Language::Python,
        Language::JavaScript,
        Language::Mjs,
        Language::Cjs,
        Language::TypeScript,
        Language::Shell,
        Language::Go,
        Language::Ruby,
        Language::C,
        Language::Cpp,
        Language::Rust,
    ];

    /// The short name (also the file extension).
    pub fn ext(self) -> &'static str {
        match self {
            Language::Python => "py",
            Language::JavaScript => "js",
            Language::Mjs => "mjs",
            Language::Cjs => "cjs",
            Language::TypeScript => "ts",
            Language::Shell => "sh",
            Language::Go => "go",
            Language::Ruby => "rb",
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Rust => "rs",
        }
    }

    /// The program the image must provide.
    pub fn program(self) -> &'static str {
        match self {
            Language::Python => "python3",
            Language::JavaScript | Language::Mjs | Language::Cjs => "node",
            Language::TypeScript => "bun",
            Language::Shell => "bash",
            Language::Go => "go",
            Language::Ruby => "ruby",
            Language::C => "gcc",
            Language::Cpp => "g++",
            Language::Rust => "rustc",
        }
    }

    /// The file the code is written to, relative to `/work`.
    pub fn file(self) -> String {
        format!("main.{}", self.ext())
    }

    /// The command line run in `/work`.
    pub fn command(self) -> String {
        let file = self.file();
        match self {
            Language::Go => format!("go run {file}"),
            Language::C | Language::Cpp | Language::Rust => {
                format!("{} -o main {file} && ./main", self.program())
            }
            _ => format!("{} {file}", self.program()),
        }
    }

    /// Short names accepted on input, besides [`Language::ext`].
    fn aliases(self) -> &'static [&'static str] {
        match self {
            Language::Python => &["python", "python3"],
            Language::JavaScript => &["javascript", "node"],
            Language::TypeScript => &["typescript"],
            Language::Shell => &["bash", "shell"],
            Language::Go => &["golang"],
            Language::Ruby => &["ruby"],
            Language::Cpp => &["c++", "cc", "cxx"],
            Language::Rust => &["rust"],
            Language::Mjs | Language::Cjs | Language::C => &[],
        }
    }

    /// Every accepted name, for help texts and schemas.
    pub fn names() -> Vec<&'static str> {
        Language::ALL.iter().map(|l| l.ext()).collect()
    }
}

impl FromStr for Language {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Language::ALL
            .into_iter()
            .find(|l| l.ext() == wanted || l.aliases().contains(&wanted.as_str()))
            .ok_or_else(|| {
                Error::invalid(
                    "lang",
                    format!(
                        "unknown language {s:?}; one of {}",
                        Language::names().join(", ")
                    ),
                )
            })
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RunCodeRequest {
    /// The language.
    pub language: Language,
    /// The source code.
    pub code: String,
    /// Fed to the program's standard input (otherwise it reads EOF).
    pub stdin: Option<Vec<u8>>,
}

impl RunCodeRequest {
    /// Run `code` as `language`.
    pub fn new(language: Language, code: impl Into<String>) -> Self {
        RunCodeRequest {
            language,
            code: code.into(),
            stdin: None,
        }
    }

    /// Feed `input` to its stdin.
    pub fn stdin(mut self, input: impl Into<Vec<u8>>) -> Self {
        self.stdin = Some(input.into());
        self
    }

    /// Check sizes (nothing is created).
    pub fn validate(&self) -> Result<(), Error> {
        if self.code.trim().is_empty() {
            return Err(Error::invalid("code", "must not be empty"));
        }
        if self.code.len() > MAX_CODE_BYTES {
            return Err(Error::invalid(
                "code",
                format!(
                    "is {} bytes, over the limit of {MAX_CODE_BYTES}",
                    self.code.len()
                ),
            ));
        }
        if let Some(input) = &self.stdin {
            if input.len() > MAX_CODE_BYTES {
                return Err(Error::invalid(
                    "stdin",
                    format!(
                        "is {} bytes, over the limit of {MAX_CODE_BYTES}",
                        input.len()
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Run a snippet in a fresh sandbox (destroyed afterwards unless a retention rule applies).
/// An image without the language's program fails with [`JobError::MissingRuntime`].
pub async fn run_code(
    client: &Client,
    request: RunCodeRequest,
    options: &JobOptions,
    cancel: &CancellationToken,
    progress: Option<JobProgress>,
) -> Result<JobResult, JobError> {
    request.validate().map_err(JobError::Invalid)?;
    options.create_request().map_err(JobError::Invalid)?;
    let lang = request.language;
    let mut files = vec![(
        format!("{WORK_DIR}/{}", lang.file()),
        request.code.into_bytes(),
    )];
    let input = match request.stdin {
        Some(data) => {
            files.push((format!("{WORK_DIR}/.stdin"), data));
            ".stdin"
        }
        None => "/dev/null",
    };
    let command = lang.command();
    let plan = JobPlan {
        job: 0,
        script: format!("( {command} ) < {input}"),
        command,
        upload: None,
        files,
        needs: Some((lang.ext(), lang.program())),
        artifact: None,
    };
    run_job(client, plan, options, cancel, progress).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table() {
        assert_eq!(Language::Python.command(), "python3 main.py");
        assert_eq!(Language::Mjs.command(), "node main.mjs");
        assert_eq!(Language::TypeScript.command(), "bun main.ts");
        assert_eq!(Language::Go.command(), "go run main.go");
        assert_eq!(Language::C.command(), "gcc -o main main.c && ./main");
        assert_eq!(Language::Cpp.command(), "g++ -o main main.cpp && ./main");
        assert_eq!(Language::Rust.command(), "rustc -o main main.rs && ./main");
        assert_eq!("python".parse::<Language>().unwrap(), Language::Python);
        assert_eq!("C++".parse::<Language>().unwrap(), Language::Cpp);
        assert!("cobol".parse::<Language>().is_err());
        for lang in Language::ALL {
            assert_eq!(lang.ext().parse::<Language>().unwrap(), lang);
        }
    }
}
