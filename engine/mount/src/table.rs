//! The kernel's mount table, as far as mounts care: which directories are FUSE mount
//! points right now (`/proc/self/mountinfo`).

use std::fs;

/// Mount points the kernel has, of our filesystem type.
pub fn mounted_dirs() -> Vec<String> {
    fuse_mounts().into_iter().map(|m| m.dir).collect()
}

/// One FUSE mount in the table.
pub struct Entry {
    pub dir: String,
    /// `major:minor`: which mount this is. A mount made later at the same directory
    /// has another, so a process that must unmount only its own mount compares it.
    pub device: String,
}

/// The FUSE mounts the kernel has, in the table's order (a mount stacked over another
/// at the same directory comes after it).
pub fn fuse_mounts() -> Vec<Entry> {
    match fs::read_to_string("/proc/self/mountinfo") {
        Ok(text) => parse(&text),
        Err(_) => Vec::new(),
    }
}

fn parse(mountinfo: &str) -> Vec<Entry> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let fstype = right.split(' ').next()?;
            if !fstype.starts_with("fuse") {
                return None;
            }
            let mut fields = left.split(' ');
            let device = fields.nth(2)?.to_string();
            let point = fields.nth(1)?;
            Some(Entry {
                dir: unescape(point),
                device,
            })
        })
        .collect()
}

/// The device of the mount visible at `dir` now (the topmost one), if any: read from
/// the table, so a mount whose process hangs or is gone is never touched.
pub fn device_at(dir: &std::path::Path) -> Option<String> {
    let d = dir.to_string_lossy();
    fuse_mounts()
        .into_iter()
        .rev()
        .find(|m| m.dir == d)
        .map(|m| m.device)
}

/// mountinfo escapes space, tab, newline and backslash as octal.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuse_mounts_are_read_with_their_device_in_order() {
        let text = "\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
41 22 0:52 / /mnt/a\\040b rw,nosuid shared:20 - fuse.sealvol sealvol:t/w@b3:1 ro
42 22 0:53 / /mnt/a\\040b rw,nosuid shared:21 - fuse.sealvol sealvol:t/w@b3:2 ro
43 22 0:54 / /mnt/c rw - fuse sealvol ro
";
        let got: Vec<(String, String)> =
            parse(text).into_iter().map(|e| (e.dir, e.device)).collect();
        assert_eq!(
            got,
            [
                ("/mnt/a b".to_string(), "0:52".to_string()),
                ("/mnt/a b".to_string(), "0:53".to_string()),
                ("/mnt/c".to_string(), "0:54".to_string()),
            ]
        );
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/x\134y"), r"/x\y");
        assert_eq!(unescape("/plain"), "/plain");
    }
}
