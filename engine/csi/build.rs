//! With the `regenerate-proto` feature, writes proto/csi.v1.rs (the CSI services' Rust
//! code, checked in) from the spec's own protobuf, proto/csi.proto, with a protobuf
//! compiler written in Rust: no `protoc` is needed. Without it, nothing: a build does
//! not compile a protobuf compiler.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    #[cfg(feature = "regenerate-proto")]
    regenerate()?;
    Ok(())
}

#[cfg(feature = "regenerate-proto")]
fn regenerate() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/csi.proto");
    let out = std::env::var("OUT_DIR")?;
    let fds = protox::compile(["csi.proto"], ["proto"])?;
    tonic_prost_build::configure()
        // kubelet is the client; sealvol only answers.
        .build_client(false)
        .out_dir(&out)
        .compile_fds(fds)?;
    let code = std::fs::read_to_string(format!("{out}/csi.v1.rs"))?;
    let checked_in = std::fs::read_to_string("proto/csi.v1.rs")?;
    // The header (its first comment lines) stays; the code is the compiler's.
    let header: String = checked_in
        .lines()
        .take_while(|l| l.starts_with("// ") && !l.contains("@generated"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write("proto/csi.v1.rs", header + &code)?;
    Ok(())
}
