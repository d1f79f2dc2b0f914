//! Generates the CSI services' Rust code from the spec's own protobuf
//! (proto/csi.proto, unmodified), with a protobuf compiler written in Rust: no `protoc`
//! needs to be installed to build sealvol.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/csi.proto");
    let fds = protox::compile(["csi.proto"], ["proto"])?;
    tonic_prost_build::configure()
        // kubelet is the client; sealvol only answers.
        .build_client(false)
        .compile_fds(fds)?;
    Ok(())
}
