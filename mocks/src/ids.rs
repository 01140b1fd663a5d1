//! Identifier and name generation: ULID-based ids (`sb-01J…`), secrets, and
//! friendly `<adjective>-<animal>` sandbox names.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::Rng;

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// Last (millisecond, randomness) pair handed out, so ids generated within the same
/// millisecond still sort in creation order (monotonic ULIDs).
static LAST_ULID: Mutex<(u64, u128)> = Mutex::new((0, 0));

/// A 26-character Crockford base32 ULID (48-bit millisecond time + 80 random bits).
pub fn ulid() -> String {
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let random_mask: u128 = (1u128 << 80) - 1;
    let (ms, random) = {
        let mut last = LAST_ULID.lock().unwrap_or_else(|e| e.into_inner());
        if now_ms <= last.0 {
            // Same (or earlier, clock skew) millisecond: bump the randomness.
            last.1 = (last.1 + 1) & random_mask;
        } else {
            last.0 = now_ms;
            last.1 = rand::thread_rng().gen::<u128>() & random_mask & !(1u128 << 79);
        }
        *last
    };
    let value: u128 = ((ms as u128) << 80) | random;
    let mut out = [0u8; 26];
    for (i, slot) in out.iter_mut().enumerate() {
        let shift = 5 * (25 - i);
        *slot = CROCKFORD[((value >> shift) & 31) as usize];
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `prefix` + ULID, e.g. `new_id("sb-")` → `sb-01JDZ…`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}{}", ulid())
}

/// `len` random characters from `[a-z0-9]`, for secrets and tokens.
pub fn random_token(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::thread_rng();
    (0..len)
        .map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())] as char)
        .collect()
}

const ADJECTIVES: &[&str] = &[
    "brave", "calm", "clever", "eager", "fancy", "gentle", "happy", "jolly", "keen", "lively",
    "mellow", "nimble", "proud", "quick", "quiet", "rapid", "shiny", "silent", "sunny", "swift",
    "tidy", "vivid", "witty", "zesty", "bold", "bright", "cosy", "daring", "frosty", "golden",
];
const ANIMALS: &[&str] = &[
    "otter", "badger", "falcon", "heron", "lynx", "marmot", "newt", "ocelot", "panda", "quail",
    "raven", "salmon", "tapir", "urchin", "vole", "walrus", "yak", "zebra", "beaver", "coyote",
    "dingo", "egret", "ferret", "gecko", "ibis", "jackal", "koala", "lemur", "moose", "puffin",
];

/// A random `<adjective>-<animal>` name.
pub fn friendly_name() -> String {
    let mut rng = rand::thread_rng();
    format!(
        "{}-{}",
        ADJECTIVES[rng.gen_range(0..ADJECTIVES.len())],
        ANIMALS[rng.gen_range(0..ANIMALS.len())]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulids_are_26_chars_and_monotonic() {
        let a = ulid();
        let b = ulid();
        assert_eq!(a.len(), 26);
        assert!(b > a, "{b} should sort after {a}");
        assert!(new_id("sb-").starts_with("sb-"));
    }

    #[test]
    fn friendly_names_have_two_parts() {
        let name = friendly_name();
        assert_eq!(name.split('-').count(), 2);
    }
}
