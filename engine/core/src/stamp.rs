//! Who made a change and when, as every record the repository keeps states it
//! (manifests, tag moves, damage records, the trash): `user@host` and RFC 3339 in UTC.

use std::time::SystemTime;

/// The time records are stamped with and the trash's window is measured by. Tests of
/// retention set `SEALVOL_NOW` (RFC 3339) to be days ahead instead of sleeping; it
/// moves no other clock (object ages in garbage collection are the store's own).
pub fn now() -> SystemTime {
    static FIXED: std::sync::OnceLock<Option<SystemTime>> = std::sync::OnceLock::new();
    let fixed = FIXED.get_or_init(|| {
        let v = std::env::var("SEALVOL_NOW").ok()?;
        match humantime::parse_rfc3339_weak(&v) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!(
                    "SEALVOL_NOW={v:?} is not an RFC 3339 time ({e}); using the real clock"
                );
                None
            }
        }
    });
    fixed.unwrap_or_else(SystemTime::now)
}

pub fn now_rfc3339() -> String {
    rfc3339(now())
}

pub fn rfc3339(t: SystemTime) -> String {
    humantime::format_rfc3339_millis(t).to_string()
}

/// A stamp as messages show it, to the minute: `2026-12-01 13:25`.
pub fn to_minute(stamp: &str) -> String {
    stamp.get(..16).unwrap_or(stamp).replace('T', " ")
}

/// A stamp written by `now_rfc3339`, read back.
pub fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s).ok()
}

std::thread_local! {
    /// Who this thread acts for, when it is not its own process's user (`on_behalf`).
    static ACTING_FOR: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Runs `f` with records stamped as made by `who`: a server making a change a key
/// holder asked for writes who asked (`ana@laptop (key ci)`), not itself.
pub fn on_behalf<T>(who: &str, f: impl FnOnce() -> T) -> T {
    let before = ACTING_FOR.with(|a| a.replace(Some(who.to_string())));
    let out = f();
    ACTING_FOR.with(|a| *a.borrow_mut() = before);
    out
}

pub fn whoami() -> String {
    if let Some(who) = ACTING_FOR.with(|a| a.borrow().clone()) {
        return who;
    }
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

/// When a tag moved now is to expire, from what a person wrote as `flag` (`--expires`,
/// `expires=`): a duration from `now` (30d, 12h) or a time (RFC 3339), in the future,
/// as RFC 3339.
pub fn expiry(flag: &str, when: &str, now: SystemTime) -> crate::error::Result<String> {
    // RFC 3339 has four digits for the year: 9999-12-31T23:59:59Z is the last time a
    // tag's expiry can be written (and read back).
    let last = std::time::UNIX_EPOCH + std::time::Duration::from_secs(253_402_300_799);
    let too_late = || {
        crate::error::Error::invalid(format!("{flag} {when}: that is past the year 9999")).hint(
            format!("give a time before 10000-01-01, or no {flag} for a tag that never expires"),
        )
    };
    let at = match humantime::parse_duration(when) {
        Ok(d) => now
            .checked_add(d)
            .filter(|at| *at <= last)
            .ok_or_else(too_late)?,
        Err(_) => humantime::parse_rfc3339_weak(when).map_err(|_| {
            crate::error::Error::invalid(format!(
                "{flag} {when:?} is neither a duration nor a time"
            ))
            .hint("write 30d or 12h (from now), or a time: 2027-01-31T00:00:00Z")
        })?,
    };
    if at <= now {
        return Err(
            crate::error::Error::invalid(format!("{flag} {when}: that time has passed")).hint(
                format!("give a time in the future, or a duration: {flag} 30d"),
            ),
        );
    }
    if at > last {
        return Err(too_late());
    }
    Ok(humantime::format_rfc3339_millis(at).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_past_the_year_9999_is_refused_with_a_line_not_a_panic() {
        let now = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_800_000_000);
        for when in ["9000y", "100000000000y"] {
            let e = expiry("--expires", when, now).unwrap_err();
            assert_eq!(e.kind(), crate::error::ErrorKind::Invalid, "{when}");
            assert!(e.to_string().contains("9999"), "{when}: {e}");
        }
        assert_eq!(
            expiry("--expires", "9999-12-31T23:59:59Z", now).unwrap(),
            "9999-12-31T23:59:59.000Z"
        );
        assert!(expiry("--expires", "30d", now).is_ok());
        let e = expiry("expires=", "soon", now).unwrap_err();
        assert!(e.to_string().starts_with("expires= \"soon\""), "{e}");
    }
}
