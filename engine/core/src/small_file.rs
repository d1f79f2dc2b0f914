//! Reading a small file a user named (a key, a peers list): it must be a regular file
//! of a bounded size. A FIFO named there would block the reader forever, `/dev/zero`
//! would fill its memory; both are refused with a line, whatever the path became
//! between a look and the open (the file is opened without blocking and judged by
//! what was opened).

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::{Error, Result};

/// The bytes of the regular file at `path`, at most `max` of them; `what` names it in
/// messages ("public key").
pub fn read(path: &Path, what: &str, max: u64) -> Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| Error::io(&format!("cannot read {what}"), path, e))?;
    let meta = file
        .metadata()
        .map_err(|e| Error::io(&format!("cannot read {what}"), path, e))?;
    if !meta.is_file() {
        return Err(Error::invalid(format!(
            "{} is not a regular file, so it is not a {what}",
            path.display()
        ))
        .hint(format!("give the path of the {what} file itself")));
    }
    let mut out = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut out)
        .map_err(|e| Error::io(&format!("cannot read {what}"), path, e))?;
    if out.len() as u64 > max {
        return Err(Error::invalid(format!(
            "{} is larger than any {what} ({} bytes at most)",
            path.display(),
            max
        ))
        .hint(format!("give the path of the {what} file itself")));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_a_device_a_directory_and_a_large_file_are_refused_at_once() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a path we own.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let big = d.path().join("big");
        std::fs::write(&big, vec![b'x'; 100]).unwrap();
        for (p, why) in [
            (fifo.as_path(), "not a regular file"),
            (Path::new("/dev/zero"), "not a regular file"),
            (d.path(), "not a regular file"),
            (big.as_path(), "larger than any"),
        ] {
            let e = read(p, "public key", 64).unwrap_err();
            assert!(e.to_string().contains(why), "{}: {e}", p.display());
        }
        std::fs::write(&big, b"small").unwrap();
        assert_eq!(read(&big, "public key", 64).unwrap(), b"small");
    }
}
