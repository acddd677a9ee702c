//! Upload tokens: 32 random bytes shown once; the site keeps only their
//! SHA-256, so a copy of the database cannot upload.

use sha2::{Digest, Sha256};

use crate::SiteError;
use crate::db::Db;

const PREFIX: &str = "smt_";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Random hex of `n` bytes from the operating system's generator.
pub fn random_hex(n: usize) -> Result<String, SiteError> {
    let mut buf = vec![0u8; n];
    getrandom::fill(&mut buf).map_err(|e| SiteError::Random(e.to_string()))?;
    Ok(hex(&buf))
}

pub fn hash(token: &str) -> String {
    hex(&Sha256::digest(token.trim().as_bytes()))
}

/// A token name becomes the runs' "by @name": letters, digits, `.`, `_`, `-`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Creates a token named `name` and returns it: the only time it is seen.
pub async fn create(db: &Db, name: &str) -> Result<String, SiteError> {
    if !valid_name(name) {
        return Err(SiteError::BadTokenName(name.to_string()));
    }
    let token = format!("{PREFIX}{}", random_hex(32)?);
    db.add_token(name, &hash(&token)).await?;
    Ok(token)
}

/// The uploader's name for a bearer token, if it is live.
pub async fn check(db: &Db, token: &str) -> Result<Option<String>, SiteError> {
    let token = token.trim();
    if !token.starts_with(PREFIX) || token.len() != PREFIX.len() + 64 {
        return Ok(None);
    }
    db.token_name(&hash(token)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(valid_name("alice") && valid_name("ci.bot-2_x"));
        assert!(!valid_name("") && !valid_name("a b") && !valid_name("<script>") && !valid_name(&"a".repeat(65)));
    }

    #[test]
    fn hashes_are_sha256_hex() {
        assert_eq!(hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_eq!(random_hex(32).unwrap().len(), 64);
        assert_ne!(random_hex(8).unwrap(), random_hex(8).unwrap());
    }
}
