//! What counts as a credential in a configuration value, and how one is shown: `***`.
//!
//! Used wherever configuration values are shown (the configuration in `/status`, log
//! lines that name a URL). The configuration's hash still covers the real values: it is
//! one-way, and a changed password must change it.
//!
//! - A key whose name says it holds a credential (`password`, `secret`, `token`,
//!   `sasl.password`, `ssl.key.pem`, `client_secret`, `access_key`, …) is a credential;
//!   one that names where a credential is (`…_env`, `…_file`) is not.
//! - In a URL, the user-info's password (`https://user:***@host`), a user-info with no
//!   password (`https://***@host`, a token), and the values of query parameters whose
//!   names say credential (`sig`, `token`, `key`, `X-Amz-Signature`, …) are.

use std::borrow::Cow;

/// What a credential is shown as.
pub const MASK: &str = "***";

/// Words that make a key (or a query parameter) name a credential.
const SECRET_WORDS: &[&str] = &[
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "token",
    "credential",
    "credentials",
    "creds",
    "apikey",
    "signature",
    "sig",
    "sas",
    "cookie",
    "authorization",
];

/// Pairs of words that together name a credential (`access_key`, `ssl.key.pem`).
const SECRET_PAIRS: &[(&str, &str)] = &[
    ("access", "key"),
    ("account", "key"),
    ("api", "key"),
    ("private", "key"),
    ("secret", "key"),
    ("shared", "key"),
    ("key", "pem"),
    ("client", "secret"),
    ("nkey", "seed"),
];

/// Last words of a name that point at a credential rather than hold one.
const POINTER_WORDS: &[&str] = &["env", "file", "path", "name", "mechanism", "username"];

/// The lower-case words of a name: split on `_`, `-`, `.` and spaces.
fn words(name: &str) -> Vec<String> {
    name.split(['_', '-', '.', ' '])
        .filter(|w| !w.is_empty())
        .map(str::to_ascii_lowercase)
        .collect()
}

/// Whether a key (or query parameter) named `name` holds a credential.
///
/// # Examples
///
/// ```
/// use weir::keys::redact::is_secret_name;
///
/// assert!(is_secret_name("password"));
/// assert!(is_secret_name("ssl.key.password"));
/// assert!(is_secret_name("sasl.oauthbearer.client.secret"));
/// assert!(is_secret_name("X-Amz-Signature"));
/// assert!(!is_secret_name("password_env"));
/// assert!(!is_secret_name("creds_file"));
/// assert!(!is_secret_name("sasl_mechanism"));
/// assert!(!is_secret_name("max_lag"));
/// ```
pub fn is_secret_name(name: &str) -> bool {
    let words = words(name);
    if words
        .last()
        .is_some_and(|last| POINTER_WORDS.contains(&last.as_str()))
    {
        return false;
    }
    let has = |w: &str| words.iter().any(|x| x == w);
    words.iter().any(|w| SECRET_WORDS.contains(&w.as_str()))
        || SECRET_PAIRS.iter().any(|(a, b)| has(a) && has(b))
        || words.len() == 1 && (has("key") || has("auth") || has("code"))
}

/// `text` with the credentials of a URL in it masked (see the [module docs](self)); the
/// text itself when it holds none.
///
/// # Examples
///
/// ```
/// use weir::keys::redact::url;
///
/// assert_eq!(url("https://user:hunter2@example.com/x"), "https://user:***@example.com/x");
/// assert_eq!(url("https://tok3n@example.com"), "https://***@example.com");
/// assert_eq!(url("https://h/p?sv=2024&sig=abc%2B&x=1"), "https://h/p?sv=2024&sig=***&x=1");
/// assert_eq!(url("s3://bucket/prefix"), "s3://bucket/prefix");
/// ```
pub fn url(text: &str) -> Cow<'_, str> {
    let Some(scheme_end) = text.find("://") else {
        return Cow::Borrowed(text);
    };
    let after_scheme = scheme_end + 3;
    let rest = &text[after_scheme..];
    let authority_len = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_len];
    let mut out = String::with_capacity(text.len());
    out.push_str(&text[..after_scheme]);
    let mut changed = false;
    match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            if let Some((user, _)) = userinfo.split_once(':') {
                out.push_str(user);
                out.push(':');
            }
            out.push_str(MASK);
            out.push_str(&authority[at..]);
            changed = true;
        }
        None => out.push_str(authority),
    }
    let tail = &rest[authority_len..];
    let (before_fragment, fragment) = tail.split_at(tail.find('#').unwrap_or(tail.len()));
    match before_fragment.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    out.push('&');
                }
                match pair.split_once('=') {
                    Some((name, value)) if is_secret_name(name) && !value.is_empty() => {
                        out.push_str(name);
                        out.push('=');
                        out.push_str(MASK);
                        changed = true;
                    }
                    _ => out.push_str(pair),
                }
            }
        }
        None => out.push_str(before_fragment),
    }
    out.push_str(fragment);
    if changed {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names() {
        for secret in [
            "password",
            "token",
            "auth_token",
            "sasl.password",
            "ssl.key.password",
            "ssl.keystore.password",
            "ssl.key.pem",
            "sasl.oauthbearer.client.secret",
            "secret_access_key",
            "access_key_id",
            "account_key",
            "sas_token",
            "nkey_seed",
            "X-Api-Key",
            "access_token",
            "key",
            "code",
        ] {
            assert!(is_secret_name(secret), "{secret}");
        }
        for plain in [
            "password_env",
            "token_env",
            "auth_token_env",
            "sasl_password_env",
            "nkey_seed_file",
            "creds_file",
            "sasl_username",
            "sasl_mechanism",
            "url",
            "client_id",
            "keepalive",
            "max_lag",
            "key_field",
            "topics",
            "sv",
        ] {
            assert!(!is_secret_name(plain), "{plain}");
        }
    }

    #[test]
    fn urls_keep_everything_but_the_credentials() {
        assert_eq!(url("nats://127.0.0.1:4222"), "nats://127.0.0.1:4222");
        assert_eq!(url("not a url"), "not a url");
        assert_eq!(
            url("https://u:p@h:1/a?token=t&page=2#frag"),
            "https://u:***@h:1/a?token=***&page=2#frag"
        );
        assert_eq!(url("http://h/a?key="), "http://h/a?key=");
        assert_eq!(
            url("https://acct.blob.example/c?sv=1&se=2&sig=AbC"),
            "https://acct.blob.example/c?sv=1&se=2&sig=***"
        );
        // An `@` in the path is not user-info.
        assert_eq!(url("https://h/a@b"), "https://h/a@b");
    }
}
