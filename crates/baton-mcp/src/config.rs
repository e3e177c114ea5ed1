//! One server's configuration (`[mcp_servers.NAME]`), as written, and what it resolves to.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use baton_tools::baton_sandbox::Mode;

use crate::McpError;

/// How long a server may take to start and answer the handshake and tool list, by default.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long one tool call may take, by default.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// A server as configured: a command (stdio) or a URL (streamable HTTP), and the rules for its
/// tools. Unknown keys are refused, so a misspelt one is an error rather than silently ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// stdio: the program to start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Names of environment variables passed through to the server (their values are read
    /// from baton's environment, never written down).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// stdio: where the server runs (default: the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP: the server's endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Streamable HTTP: the environment variable holding a bearer token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout_secs: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_timeout_secs: Option<u64>,
    /// Only these tools (by the server's names); all when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_tools: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_tools: Vec<String>,
    /// The effect of every tool of the server, whatever its annotations say (`read_only` or
    /// `mutating`); `read_only_tools` and `mutating_tools` still win for the tools they name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<baton_core::ToolEffect>,
    /// Tools treated as read-only whatever their annotations say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_only_tools: Vec<String>,
    /// Tools treated as mutating whatever their annotations say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mutating_tools: Vec<String>,
    /// stdio: the sandbox the server runs in (as for commands).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_network: bool,
}

/// How to reach a server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    Stdio {
        command: String,
        args: Vec<String>,
        /// Variables to pass through, by name.
        env: Vec<String>,
        cwd: Option<PathBuf>,
    },
    StreamableHttp {
        url: String,
        bearer_token_env: Option<String>,
    },
}

/// A configured server, checked: its name, transport, limits and tool rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    pub name: String,
    pub transport: Transport,
    pub startup_timeout: Duration,
    pub tool_timeout: Duration,
    pub enabled_tools: Option<Vec<String>>,
    pub disabled_tools: Vec<String>,
    pub read_only_tools: Vec<String>,
    pub mutating_tools: Vec<String>,
    /// The server-wide effect override (`effect`).
    pub effect: Option<baton_core::ToolEffect>,
    /// stdio: what the sandbox lets the server change (default `workspace-write`).
    pub sandbox: Mode,
    pub allow_network: bool,
}

impl ServerSpec {
    /// Checks `config`: exactly one of `command` and `url`, no stdio keys on an HTTP server and
    /// the other way round, a usable name, and timeouts above zero.
    pub fn new(name: &str, config: &McpServerConfig) -> Result<ServerSpec, McpError> {
        let invalid = |detail: String| McpError::Config {
            server: name.to_owned(),
            detail,
        };
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(invalid(
                "a server name may hold only letters, digits, '-' and '_'".into(),
            ));
        }
        let transport = match (&config.command, &config.url) {
            (Some(command), None) => {
                if config.bearer_token_env.is_some() {
                    return Err(invalid("`bearer_token_env` is for `url` servers".into()));
                }
                if command.trim().is_empty() {
                    return Err(invalid("`command` is empty".into()));
                }
                Transport::Stdio {
                    command: command.clone(),
                    args: config.args.clone(),
                    env: config.env.clone(),
                    cwd: config.cwd.clone(),
                }
            }
            (None, Some(url)) => {
                if !config.args.is_empty() || !config.env.is_empty() || config.cwd.is_some() {
                    return Err(invalid(
                        "`args`, `env` and `cwd` are for `command` servers".into(),
                    ));
                }
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(invalid(format!(
                        "`url` must be http:// or https://, not {url:?}"
                    )));
                }
                Transport::StreamableHttp {
                    url: url.clone(),
                    bearer_token_env: config.bearer_token_env.clone(),
                }
            }
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "set `command` (stdio) or `url` (HTTP), not both".into(),
                ));
            }
            (None, None) => {
                return Err(invalid("set `command` (stdio) or `url` (HTTP)".into()));
            }
        };
        let seconds = |value: Option<u64>, default: Duration, key: &str| match value {
            Some(0) => Err(invalid(format!("`{key}` must be at least 1"))),
            Some(s) => Ok(Duration::from_secs(s)),
            None => Ok(default),
        };
        let sandbox = match &config.sandbox {
            None => Mode::default(),
            Some(_) if config.url.is_some() => {
                return Err(invalid("`sandbox` is for `command` servers".into()));
            }
            Some(mode) => mode
                .parse::<Mode>()
                .map_err(|e| invalid(format!("`sandbox`: {e}")))?,
        };
        Ok(ServerSpec {
            sandbox,
            allow_network: config.allow_network,
            name: name.to_owned(),
            transport,
            startup_timeout: seconds(
                config.startup_timeout_secs,
                DEFAULT_STARTUP_TIMEOUT,
                "startup_timeout_secs",
            )?,
            tool_timeout: seconds(
                config.tool_timeout_secs,
                DEFAULT_TOOL_TIMEOUT,
                "tool_timeout_secs",
            )?,
            enabled_tools: config.enabled_tools.clone(),
            disabled_tools: config.disabled_tools.clone(),
            read_only_tools: config.read_only_tools.clone(),
            mutating_tools: config.mutating_tools.clone(),
            effect: config.effect,
        })
    }

    /// Whether the server's tool `name` is offered.
    pub fn offers(&self, name: &str) -> bool {
        let enabled = self
            .enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == name));
        enabled && !self.disabled_tools.iter().any(|t| t == name)
    }
}

/// Every configured server, checked, in name order (a `BTreeMap` keeps the order deterministic).
pub fn server_specs(
    servers: &BTreeMap<String, McpServerConfig>,
) -> Result<Vec<ServerSpec>, McpError> {
    servers
        .iter()
        .map(|(name, config)| ServerSpec::new(name, config))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> BTreeMap<String, McpServerConfig> {
        #[derive(Deserialize)]
        struct File {
            mcp_servers: BTreeMap<String, McpServerConfig>,
        }
        let file: File = serde_json::from_value(toml_like(toml_text)).unwrap();
        file.mcp_servers
    }

    /// The tests write configs as JSON with the shape of the TOML tables.
    fn toml_like(text: &str) -> serde_json::Value {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn stdio_and_http_servers_resolve() {
        let servers = parse(
            r#"{"mcp_servers": {
                "github": {"command": "npx", "args": ["-y", "server-github"], "env": ["GITHUB_TOKEN"],
                           "startup_timeout_secs": 5, "enabled_tools": ["search_issues"]},
                "docs": {"url": "https://mcp.internal/mcp", "bearer_token_env": "DOCS_TOKEN"}
            }}"#,
        );
        let specs = server_specs(&servers).unwrap();
        assert_eq!(specs[0].name, "docs");
        assert_eq!(
            specs[0].transport,
            Transport::StreamableHttp {
                url: "https://mcp.internal/mcp".into(),
                bearer_token_env: Some("DOCS_TOKEN".into()),
            }
        );
        assert_eq!(specs[0].tool_timeout, DEFAULT_TOOL_TIMEOUT);
        assert_eq!(specs[1].startup_timeout, Duration::from_secs(5));
        assert!(specs[1].offers("search_issues"));
        assert!(!specs[1].offers("delete_repo"));
    }

    #[test]
    fn contradictions_and_typos_are_refused_with_the_server_named() {
        let cases = [
            (r#"{"command": "a", "url": "http://x"}"#, "not both"),
            (r#"{}"#, "set `command`"),
            (r#"{"url": "ftp://x"}"#, "http://"),
            (
                r#"{"url": "http://x", "args": ["a"]}"#,
                "for `command` servers",
            ),
            (
                r#"{"command": "a", "bearer_token_env": "T"}"#,
                "for `url` servers",
            ),
            (r#"{"command": "a", "tool_timeout_secs": 0}"#, "at least 1"),
        ];
        for (config, expected) in cases {
            let config: McpServerConfig = serde_json::from_str(config).unwrap();
            let err = ServerSpec::new("srv", &config).unwrap_err().to_string();
            assert!(err.contains("srv") && err.contains(expected), "{err}");
        }
        let wide: McpServerConfig =
            serde_json::from_str(r#"{"command": "a", "effect": "read_only"}"#).unwrap();
        assert_eq!(wide.effect, Some(baton_core::ToolEffect::ReadOnly));
        assert!(
            serde_json::from_str::<McpServerConfig>(r#"{"command": "a", "effect": "rw"}"#).is_err()
        );
        let typo = serde_json::from_str::<McpServerConfig>(r#"{"comand": "a"}"#).unwrap_err();
        assert!(typo.to_string().contains("comand"), "{typo}");
        let bad_name = ServerSpec::new(
            "my server",
            &McpServerConfig {
                command: Some("a".into()),
                ..Default::default()
            },
        );
        assert!(bad_name.is_err());
    }

    #[test]
    fn disabled_tools_win_over_enabled_ones() {
        let spec = ServerSpec::new(
            "s",
            &McpServerConfig {
                command: Some("a".into()),
                enabled_tools: Some(vec!["a".into(), "b".into()]),
                disabled_tools: vec!["b".into()],
                ..Default::default()
            },
        )
        .unwrap();
        assert!(spec.offers("a"));
        assert!(!spec.offers("b"));
        assert!(!spec.offers("c"));
    }
}
