//! Failures of a guest file operation: the helper's stable error codes, plus the few the
//! client itself detects (no Python, a helper that did not answer, an answer too large).

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use crate::api::open_enum;
use crate::error::Error;

open_enum! {
    /// Why a guest operation failed. The helper's codes (guest/README.md) plus client-side ones
    /// (`python_missing`, `python_too_old`, `helper_failed`, `answer_too_large`,
    /// `install_failed`). `bad_args` and `bad_path` never appear here: they become
    /// [`Error::InvalidInput`].
    GuestErrorCode {
        /// The request envelope was refused (a client/helper mismatch).
        BadRequest = "bad_request",
        /// The helper speaks another protocol version.
        UnsupportedVersion = "unsupported_version",
        /// The helper does not know the operation.
        UnknownOp = "unknown_op",
        /// The path does not exist.
        NoSuchFile = "no_such_file",
        /// Not a regular file.
        NotAFile = "not_a_file",
        /// Not a directory.
        NotADirectory = "not_a_directory",
        /// A directory where a file was expected.
        IsDirectory = "is_directory",
        /// The target exists (add, move without overwrite, mkdir over a file).
        Exists = "exists",
        /// A directory is not empty (remove without recursive).
        NotEmpty = "not_empty",
        /// The guest refused access.
        PermissionDenied = "permission_denied",
        /// A text file over 1 MiB.
        TooLarge = "too_large",
        /// A file with NUL bytes or invalid UTF-8.
        BinaryFile = "binary_file",
        /// A read offset past the end.
        OutOfRange = "out_of_range",
        /// `edit`: oldString does not occur.
        NotFound = "not_found",
        /// `edit`: oldString occurs more than once (`details.count`).
        Ambiguous = "ambiguous",
        /// The patch text does not parse.
        PatchInvalid = "patch_invalid",
        /// A hunk's context does not match (`details.file`, `details.hunk`).
        PatchFailed = "patch_failed",
        /// Removing or moving `/`, the working directory or one of its parents.
        Refused = "refused",
        /// glob/grep failed (bad regex or glob, unreadable directories).
        SearchFailed = "search_failed",
        /// Another I/O error.
        IoError = "io_error",
        /// A bug in the helper.
        Internal = "internal",
        /// The sandbox has no `python3` (the helper needs Python ≥ 3.9).
        PythonMissing = "python_missing",
        /// The sandbox's `python3` is older than 3.9.
        PythonTooOld = "python_too_old",
        /// The helper ended without a valid answer (crash, killed, protocol mismatch).
        HelperFailed = "helper_failed",
        /// The answer was larger than the configured output bound.
        AnswerTooLarge = "answer_too_large",
        /// The helper could not be put into the sandbox.
        InstallFailed = "install_failed",
    }
}

/// A failed guest operation; carried by [`Error::Guest`].
#[derive(Clone, Debug, PartialEq)]
pub struct GuestError {
    /// The operation (`read`, `edit`, `patch`, …).
    pub op: String,
    /// Why it failed.
    pub code: GuestErrorCode,
    /// What failed and what to do, as the helper worded it.
    pub message: String,
    /// Extra facts for some codes (`ambiguous`: `count`; `patch_failed`: `file`, `hunk`;
    /// partial patches: `applied`, `not_applied`).
    pub details: Option<Value>,
}

impl GuestError {
    /// An error with no details.
    pub fn new(op: impl Into<String>, code: GuestErrorCode, message: impl Into<String>) -> Self {
        GuestError {
            op: op.into(),
            code,
            message: message.into(),
            details: None,
        }
    }

    /// The path does not exist.
    pub fn is_not_found(&self) -> bool {
        self.code == GuestErrorCode::NoSuchFile
    }
}

impl fmt::Display for GuestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "guest {} failed: {} [{}]",
            self.op, self.message, self.code
        )
    }
}

impl std::error::Error for GuestError {}

impl From<GuestError> for Error {
    fn from(e: GuestError) -> Self {
        Error::Guest(crate::error::Detail::new(e))
    }
}

impl Error {
    /// The guest failure, for [`Error::Guest`].
    pub fn guest(&self) -> Option<&GuestError> {
        match self {
            Error::Guest(g) => g.downcast_ref::<GuestError>(),
            _ => None,
        }
    }

    /// The guest error code, for [`Error::Guest`].
    pub fn guest_code(&self) -> Option<&GuestErrorCode> {
        self.guest().map(|g| &g.code)
    }
}

/// `{"code", "message", "details"?}` of an error answer.
#[derive(Debug, Deserialize)]
pub(super) struct WireError {
    pub code: String,
    #[serde(default)]
    pub message: String,
    #[serde(default)]
    pub details: Option<Value>,
}

impl WireError {
    /// The crate error for this answer: argument and path problems are input errors, the rest
    /// keep their code.
    pub(super) fn into_error(self, op: &str) -> Error {
        match self.code.as_str() {
            "bad_args" => Error::invalid("arguments", self.message),
            "bad_path" => Error::invalid("path", self.message),
            code => GuestError {
                op: op.to_string(),
                code: GuestErrorCode::from(code),
                message: self.message,
                details: self.details.filter(|d| !d.is_null()),
            }
            .into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_core_error_gives_the_guest_error_back() {
        let guest = GuestError::new("edit", GuestErrorCode::Ambiguous, "found twice");
        let err = Error::from(guest.clone());
        assert_eq!(err.guest(), Some(&guest));
        assert_eq!(err.guest_code(), Some(&GuestErrorCode::Ambiguous));
        assert_eq!(
            err.to_string(),
            "guest edit failed: found twice [ambiguous]"
        );
        assert!(
            format!("{err:?}").starts_with("Guest(GuestError {"),
            "{err:?}"
        );
        assert!(Error::Cancelled.guest().is_none());
    }
}
