//! The crate's one error type.

use std::time::Duration;

/// What can go wrong configuring or calling a hosted reranker.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A setting is missing or invalid (`field` names the flag or variable).
    #[error("{field}: {reason}")]
    Config {
        /// The flag or environment variable.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The service did not answer within the deadline.
    #[error("{service} did not answer within {} ms", .after.as_millis())]
    Timeout {
        /// The service called.
        service: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// The service answered with an error status.
    #[error("{service} answered {status}: {message}")]
    Status {
        /// The service called.
        service: &'static str,
        /// The HTTP status (or the AWS error code).
        status: String,
        /// The service's message, cut to 200 characters.
        message: String,
    },
    /// The request could not be sent or the answer not read (connection refused, TLS, a
    /// body cut short).
    #[error("{service}: {reason}")]
    Transport {
        /// The service called.
        service: &'static str,
        /// What failed.
        reason: String,
    },
    /// The answer does not follow the protocol (not JSON, an index out of range, a
    /// passage ranked twice, a score that is not a number).
    #[error("{service} answered outside its protocol: {reason}")]
    Protocol {
        /// The service called.
        service: &'static str,
        /// What was wrong.
        reason: String,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn config(field: &str, reason: impl Into<String>) -> Self {
        Error::Config { field: field.to_string(), reason: reason.into() }
    }
}

/// Cuts a service's message to 200 characters (on a character boundary).
pub(crate) fn cut(message: &str) -> String {
    let message = message.trim();
    match message.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &message[..i]),
        None => message.to_string(),
    }
}
