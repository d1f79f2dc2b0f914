//! Who made a change and when, as every record the repository keeps states it
//! (manifests, tag moves, damage records): `user@host` and RFC 3339 in UTC.

pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

pub fn whoami() -> String {
    let user = std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| user_of_uid());
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into());
    format!("{user}@{host}")
}

/// The login name of this process's user, from the password database.
fn user_of_uid() -> String {
    // SAFETY: getuid cannot fail; getpwuid_r writes only into the buffers we pass.
    unsafe {
        let uid = libc::getuid();
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 4096];
        let mut out: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out);
        if rc == 0
            && !out.is_null()
            && !pwd.pw_name.is_null()
            && let Ok(name) = std::ffi::CStr::from_ptr(pwd.pw_name).to_str()
        {
            return name.to_string();
        }
        format!("uid{uid}")
    }
}
