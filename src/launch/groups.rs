//! The invoking user's groups under sudo, as the group database gives them: what
//! `getgrouplist(3)` returns, asked of `getent initgroups`.
//!
//! Owns that question and nothing else (the credentials themselves are `launch`'s). ste is
//! linked statically (`.cargo/config.toml` says why), and a static glibc cannot load the NSS
//! modules the database may name: with Debian's `group: files systemd`, `getgrouplist` crashed
//! loading `libnss_systemd`. `getent`, a dynamically linked part of glibc on every system that
//! has it, answers from exactly the sources the system is configured with (files, LDAP, sssd…).
//! It runs from a fixed path with an empty environment: ste is root here, and neither the
//! caller's `PATH` nor its loader variables may choose what runs.

use std::process::{Command, Stdio};

/// Where glibc installs `getent` (Debian's `libc-bin`, and most distributions).
const GETENT: [&str; 2] = ["/usr/bin/getent", "/bin/getent"];

/// `user`'s groups: `gid` first, then every other group the database lists the user in, as
/// `getgrouplist(user, gid)` gives them. A user the database does not know has `gid` alone.
pub fn of(user: &str, gid: libc::gid_t) -> Result<Vec<libc::gid_t>, String> {
    let getent = GETENT
        .iter()
        .find(|p| std::path::Path::new(p).exists())
        .ok_or_else(|| format!("getent is not installed (looked for {})", GETENT.join(", ")))?;
    let out = Command::new(getent)
        .args(["initgroups", "--", user])
        .env_clear()
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {getent}: {e}"))?;
    // 2: the key is not in the database (a user without groups of their own).
    if !out.status.success() && out.status.code() != Some(2) {
        return Err(format!(
            "{getent} initgroups {user} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    parse(&String::from_utf8_lossy(&out.stdout), user, gid)
}

/// `getent initgroups` output: the user's name, then the gids of the groups that list the user
/// (the primary group not among them unless a group lists it).
fn parse(text: &str, user: &str, gid: libc::gid_t) -> Result<Vec<libc::gid_t>, String> {
    let mut groups = vec![gid];
    let Some(line) = text.lines().find(|l| !l.trim().is_empty()) else {
        return Ok(groups);
    };
    let mut words = line.split_whitespace();
    if words.next() != Some(user) {
        return Err(format!(
            "getent initgroups answered for another user: {line:?}"
        ));
    }
    for w in words {
        let g: libc::gid_t = w
            .parse()
            .map_err(|_| format!("getent initgroups gave a group that is not a number: {w:?}"))?;
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    Ok(groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_primary_group_first_then_each_listed_one_once() {
        // Captured from `getent initgroups stetest` (a user in audio, video and stegrp).
        let text = "stetest               29 44 1002\n";
        assert_eq!(parse(text, "stetest", 1001), Ok(vec![1001, 29, 44, 1002]));
        // A group that lists the user's primary group is not repeated.
        assert_eq!(parse("u 7 1001\n", "u", 1001), Ok(vec![1001, 7]));
    }

    #[test]
    fn a_user_without_listed_groups_has_the_primary_alone() {
        // Captured from `getent initgroups nobody`.
        assert_eq!(
            parse("nobody               \n", "nobody", 65534),
            Ok(vec![65534])
        );
        assert_eq!(parse("", "nobody", 65534), Ok(vec![65534]));
    }

    #[test]
    fn an_answer_that_is_not_this_users_groups_is_an_error() {
        assert!(parse("root 0\n", "nobody", 65534).is_err());
        assert!(parse("nobody audio\n", "nobody", 65534).is_err());
    }

    #[test]
    fn the_database_answers_as_getgrouplist_does() {
        // Whoever runs the test, as `id` (glibc's dynamic getgrouplist) sees that user. Not
        // through nix's user lookup: this test binary is static too, and would crash in it.
        let id = |args: &[&str]| {
            let o = Command::new("id").args(args).output().expect("id runs");
            assert!(o.status.success(), "id {args:?}");
            String::from_utf8_lossy(&o.stdout).trim().to_string()
        };
        let name = id(&["-un"]);
        let gid: libc::gid_t = id(&["-g"]).parse().unwrap();
        let mut expected: Vec<libc::gid_t> = id(&["-G", &name])
            .split_whitespace()
            .map(|g| g.parse().unwrap())
            .collect();
        let mut got = of(&name, gid).unwrap();
        assert_eq!(got[0], gid);
        got.sort_unstable();
        expected.sort_unstable();
        assert_eq!(got, expected);
    }
}
