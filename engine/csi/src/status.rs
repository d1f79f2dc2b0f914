//! sealvol's errors as the gRPC statuses the CSI spec expects: the code kubelet acts on
//! (it retries UNAVAILABLE and ABORTED, shows the rest as the pod's event), and one
//! line with the hint, since kubelet shows only the message.

use sealvol_core::{Error, ErrorKind};
use tonic::{Code, Status};

/// The status for an error of the engine or the embedder.
pub fn of(e: &Error) -> Status {
    let code = match e.kind() {
        ErrorKind::Usage | ErrorKind::Invalid | ErrorKind::Ambiguous => Code::InvalidArgument,
        ErrorKind::NotFound => Code::NotFound,
        ErrorKind::Conflict => Code::FailedPrecondition,
        ErrorKind::Race | ErrorKind::Changed | ErrorKind::Collected => Code::Aborted,
        ErrorKind::Corrupt => Code::DataLoss,
        ErrorKind::Format => Code::FailedPrecondition,
        ErrorKind::Denied => Code::Unauthenticated,
        // The caller's credentials are fine; the version is not one this node may serve.
        ErrorKind::Untrusted => Code::PermissionDenied,
        ErrorKind::Unavailable => Code::Unavailable,
        ErrorKind::Busy | ErrorKind::Quota => Code::ResourceExhausted,
        ErrorKind::Cancelled => Code::Cancelled,
        ErrorKind::Io => Code::Internal,
    };
    Status::new(code, line(e))
}

/// The message and its hint on one line.
pub fn line(e: &Error) -> String {
    match e.hint_text() {
        Some(h) => format!("{}; {h}", e.message()),
        None => e.message().to_string(),
    }
}

/// A refused request: what was wrong and what to do, on one line.
pub fn invalid(what: impl std::fmt::Display, todo: &str) -> Status {
    Status::invalid_argument(format!("{what}; {todo}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_keeps_the_kind_as_its_code_and_the_hint_on_its_line() {
        let e = Error::not_found("no version b3:9f3c of weights/x").hint("list them");
        let s = of(&e);
        assert_eq!(s.code(), Code::NotFound);
        assert_eq!(s.message(), "no version b3:9f3c of weights/x; list them");
        let busy = Error::new(ErrorKind::Unavailable, "the repository timed out");
        assert_eq!(of(&busy).code(), Code::Unavailable);
        assert_eq!(of(&busy).message(), "the repository timed out");
    }
}
