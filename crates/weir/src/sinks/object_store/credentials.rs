//! Where an S3 client finds its credentials, in the order the `object_store` crate
//! tries them, described for the messages of a failure: which sources the environment
//! configures, which one the client uses, and what to set to fix it. Sans IO: the
//! environment comes in as a lookup function.
//!
//! The chain (`AmazonS3Builder::from_env`, then `build`):
//! 1. `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`);
//! 2. web identity: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN` (STS);
//! 3. the ECS task role: `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`;
//! 4. EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI` and
//!    `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`;
//! 5. the instance metadata service (IMDSv2) at `AWS_METADATA_ENDPOINT`, by default
//!    `http://169.254.169.254`.
//!
//! Profiles (`AWS_PROFILE`, `~/.aws/credentials`) are not read by that crate.

/// The instance metadata service's address when `AWS_METADATA_ENDPOINT` is unset.
const DEFAULT_METADATA_ENDPOINT: &str = "http://169.254.169.254";

/// The source of S3 credentials a client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AwsSource {
    /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY`.
    Environment,
    /// `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`.
    WebIdentity,
    /// `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`.
    EcsTask,
    /// `AWS_CONTAINER_CREDENTIALS_FULL_URI` and `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`.
    EksPodIdentity,
    /// The instance metadata service.
    InstanceMetadata,
    /// `AWS_SKIP_SIGNATURE = true`: requests are not signed, no credentials are needed.
    Anonymous,
}

/// The credential chain as the environment sets it up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsChain {
    /// The source the client uses.
    pub used: AwsSource,
    /// The sources before it, each with why it was passed over.
    passed: Vec<String>,
    /// How the source used is configured (its variables, or the metadata endpoint).
    used_as: String,
    /// `AWS_PROFILE` is set (and ignored).
    profile: bool,
}

impl AwsChain {
    /// The chain configured by the variables `get` returns (`std::env::var`, or a map
    /// in tests). A variable set to the empty string is set, as the client takes it.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> AwsChain {
        let set = |name: &str| get(name);
        let anonymous = set("AWS_SKIP_SIGNATURE").is_some_and(|v| v.eq_ignore_ascii_case("true"));
        let profile = set("AWS_PROFILE").is_some();
        let mut passed = Vec::new();
        let chain = |used, used_as: String, passed: Vec<String>| AwsChain {
            used,
            passed,
            used_as,
            profile,
        };
        if anonymous {
            return chain(
                AwsSource::Anonymous,
                "AWS_SKIP_SIGNATURE = true".into(),
                passed,
            );
        }
        let pairs: [(AwsSource, &str, &str, &str); 4] = [
            (
                AwsSource::Environment,
                "the environment",
                "AWS_ACCESS_KEY_ID",
                "AWS_SECRET_ACCESS_KEY",
            ),
            (
                AwsSource::WebIdentity,
                "web identity",
                "AWS_WEB_IDENTITY_TOKEN_FILE",
                "AWS_ROLE_ARN",
            ),
            (
                AwsSource::EcsTask,
                "the ECS task role",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "",
            ),
            (
                AwsSource::EksPodIdentity,
                "EKS Pod Identity",
                "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
            ),
        ];
        for (source, what, first, second) in pairs {
            let names = if second.is_empty() {
                first.to_owned()
            } else {
                format!("{first} and {second}")
            };
            let has_first = set(first).is_some();
            let has_second = second.is_empty() || set(second).is_some();
            // The static keys are used as soon as either is set (the client refuses
            // to start with one alone).
            let used = match source {
                AwsSource::Environment => has_first || set(second).is_some(),
                _ => has_first && has_second,
            };
            if used {
                return chain(source, format!("{what} ({names})"), passed);
            }
            let why = match (has_first, set(second).is_some()) {
                _ if second.is_empty() => "not set".to_owned(),
                (false, false) => "not set".to_owned(),
                (true, _) => format!("{first} is set but {second} is not"),
                (false, true) => format!("{second} is set but {first} is not"),
            };
            passed.push(format!("{what}, {names}: {why}"));
        }
        let endpoint = set("AWS_METADATA_ENDPOINT");
        let used_as = match &endpoint {
            Some(e) => format!("the instance metadata service at {e} (AWS_METADATA_ENDPOINT)"),
            None => format!("the instance metadata service at {DEFAULT_METADATA_ENDPOINT}"),
        };
        chain(AwsSource::InstanceMetadata, used_as, passed)
    }

    /// The chain of this process's environment.
    pub fn from_env() -> AwsChain {
        AwsChain::from_lookup(|name| std::env::var(name).ok())
    }

    /// How the source used is configured, e.g. `the environment (AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY)`.
    pub fn used_as(&self) -> &str {
        &self.used_as
    }

    /// The message for credentials that could not be resolved: every source tried, in
    /// order, the last one with `error`, and what to set.
    pub fn no_credentials(&self, error: &str) -> String {
        let mut tried: Vec<String> = self.passed.clone();
        tried.push(format!("{}: {error}", self.used_as));
        let listed = tried
            .iter()
            .enumerate()
            .map(|(i, t)| format!("({}) {t}", i + 1))
            .collect::<Vec<_>>()
            .join("; ");
        let fix = match self.used {
            AwsSource::InstanceMetadata => {
                "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in weir's environment \
                 (under systemd: in /etc/default/weir), or run weir where an instance role \
                 is attached"
            }
            _ => {
                "fix that source, or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in weir's environment"
            }
        };
        let profile = if self.profile {
            "; AWS_PROFILE is set, but profiles (~/.aws/config, ~/.aws/credentials) are not read"
        } else {
            ""
        };
        format!("no S3 credentials; tried, in order: {listed}; {fix}{profile}")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{AwsChain, AwsSource};

    fn chain(vars: &[(&str, &str)]) -> AwsChain {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        AwsChain::from_lookup(|name| vars.get(name).cloned())
    }

    #[test]
    fn with_nothing_set_the_metadata_service_is_used_and_every_source_is_named() {
        let c = chain(&[]);
        assert_eq!(c.used, AwsSource::InstanceMetadata);
        let m = c.no_credentials("connection refused");
        for name in [
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_ROLE_ARN",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "http://169.254.169.254",
        ] {
            assert!(m.contains(name), "{name} in {m}");
        }
        assert!(
            m.contains(
                "(5) the instance metadata service at http://169.254.169.254: connection refused"
            ),
            "{m}"
        );
        assert!(
            m.contains("(1) the environment, AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY: not set"),
            "{m}"
        );
        assert!(!m.contains("AWS_PROFILE"), "{m}");
    }

    #[test]
    fn the_first_configured_source_is_used_and_a_half_configured_one_is_explained() {
        let c = chain(&[("AWS_ACCESS_KEY_ID", "k"), ("AWS_SECRET_ACCESS_KEY", "s")]);
        assert_eq!(c.used, AwsSource::Environment);
        let c = chain(&[("AWS_SECRET_ACCESS_KEY", "s")]);
        assert_eq!(
            c.used,
            AwsSource::Environment,
            "one key alone is still this source"
        );
        let c = chain(&[
            ("AWS_ROLE_ARN", "arn:aws:iam::1:role/r"),
            (
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                "/v2/credentials/x",
            ),
        ]);
        assert_eq!(c.used, AwsSource::EcsTask);
        let m = c.no_credentials("timed out");
        assert!(
            m.contains("AWS_ROLE_ARN is set but AWS_WEB_IDENTITY_TOKEN_FILE is not"),
            "{m}"
        );
        assert!(
            m.contains("(3) the ECS task role (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI): timed out"),
            "{m}"
        );
        let c = chain(&[
            ("AWS_WEB_IDENTITY_TOKEN_FILE", "/t"),
            ("AWS_ROLE_ARN", "arn"),
        ]);
        assert_eq!(c.used, AwsSource::WebIdentity);
    }

    #[test]
    fn the_metadata_endpoint_profile_and_anonymous_access_are_reported() {
        let c = chain(&[
            ("AWS_METADATA_ENDPOINT", "http://127.0.0.1:9"),
            ("AWS_PROFILE", "p"),
        ]);
        assert_eq!(c.used, AwsSource::InstanceMetadata);
        let m = c.no_credentials("refused");
        assert!(
            m.contains("at http://127.0.0.1:9 (AWS_METADATA_ENDPOINT): refused"),
            "{m}"
        );
        assert!(m.contains("AWS_PROFILE is set, but profiles"), "{m}");
        assert_eq!(
            chain(&[("AWS_SKIP_SIGNATURE", "true")]).used,
            AwsSource::Anonymous
        );
    }
}
