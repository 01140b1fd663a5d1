//! What [`ExecRequest`](super::exec::ExecRequest) and
//! [`ProcessSpec`](super::processes::ProcessSpec) share: the login-shell command line and the
//! argv and environment setters (both hold `args: Vec<String>` and
//! `env: BTreeMap<String, String>`; their wire forms and checks differ, so only these are common).

/// The program of a shell spec: a login shell, so the image's profile (PATH additions,
/// language toolchains) applies and shell syntax works.
pub(crate) const SHELL: &str = "bash";

/// The arguments that make [`SHELL`] run `script`.
pub(crate) fn shell_args(script: String) -> [String; 2] {
    ["-lc".to_string(), script]
}

/// `arg`, `args`, `env` and `envs` for a builder with `args` and `env` fields. The attributes
/// given (doc comments) go on `env`.
macro_rules! argv_env_setters {
    ($(#[$env_doc:meta])*) => {
        /// Append one argument.
        pub fn arg(mut self, arg: impl Into<String>) -> Self {
            self.args.push(arg.into());
            self
        }

        /// Append arguments.
        pub fn args<I, S>(mut self, args: I) -> Self
        where
            I: IntoIterator<Item = S>,
            S: Into<String>,
        {
            self.args.extend(args.into_iter().map(Into::into));
            self
        }

        $(#[$env_doc])*
        pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.env.insert(name.into(), value.into());
            self
        }

        /// Set several environment variables (see `env`).
        pub fn envs<I, K, V>(mut self, vars: I) -> Self
        where
            I: IntoIterator<Item = (K, V)>,
            K: Into<String>,
            V: Into<String>,
        {
            self.env.extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
            self
        }
    };
}

pub(crate) use argv_env_setters;
