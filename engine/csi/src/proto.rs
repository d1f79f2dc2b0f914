//! The spec's messages and service traits: proto/csi.v1.rs, generated from
//! proto/csi.proto (`cargo build -p sealvol-csi --features regenerate-proto`) and
//! checked in, so that no build compiles a protobuf compiler.

#[allow(
    clippy::all,
    clippy::pedantic,
    missing_docs,
    rustdoc::all,
    unreachable_pub
)]
mod generated {
    include!("../proto/csi.v1.rs");
}

pub use generated::*;

/// The BLAKE3 of the proto/csi.proto that proto/csi.v1.rs was generated from.
#[cfg(test)]
const GENERATED_FROM: &str = "f20f2821ba12fc19923c8f5d80912bd05ce74659f678d551ccc8dead10369a45";

#[cfg(test)]
mod tests {
    #[test]
    fn the_checked_in_code_was_generated_from_this_csi_proto() {
        let now = blake3::hash(include_bytes!("../proto/csi.proto")).to_hex();
        assert_eq!(
            now.as_str(),
            super::GENERATED_FROM,
            "proto/csi.proto changed since proto/csi.v1.rs was generated: run \
             `cargo build -p sealvol-csi --features regenerate-proto`, then set \
             GENERATED_FROM to {now}"
        );
    }
}
