//! Execution policy: which command lines may run. Rules (TOML) match each simple command of a
//! pipeline or `&&`/`||`/`;` chain, and the whole line, with a glob; the most severe decision
//! wins. Layers: built-in defaults < user file < workspace file (or `--policy FILE`); within
//! matching rules the latest layer decides, so a project may allow what the defaults forbid.
//!
//! Limits, honestly: the policy sees the command line as written. Commands hidden in scripts,
//! `$(…)`, `eval` or variables are not seen (`sh -c STRING` is unpacked one level). The policy
//! guards against mistakes; the sandbox is what enforces isolation.

use globset::{Glob, GlobMatcher};
use serde::Deserialize;
use std::path::{Path, PathBuf};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    Allow,
    Ask,
    Forbid,
}

/// What an unattended run does with an `ask` decision.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AskBehaviour {
    /// The model gets a tool error naming the rule.
    #[default]
    Refuse,
    /// The run pauses for a person (exit 3; `baton resume` continues).
    Pause,
}

#[derive(Clone, Debug)]
pub struct Rule {
    pub pattern: String,
    pub action: Action,
    pub reason: String,
    /// Allowed, but the engine snapshots the workspace right before it (`before_risky`).
    pub risky: bool,
    /// Where the rule came from (`built-in` or a file path).
    pub source: String,
    layer: usize,
    matcher: GlobMatcher,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub risky: bool,
    /// The deciding rule: pattern, reason, source.
    pub rule: Option<(String, String, String)>,
}

impl Decision {
    /// One sentence for the model or the user.
    pub fn explain(&self, command: &str) -> String {
        let verb = match self.action {
            Action::Allow => "allowed",
            Action::Ask => "needs approval",
            Action::Forbid => "is forbidden",
        };
        match &self.rule {
            Some((pattern, reason, source)) => format!(
                "`{command}` {verb} by the execution policy: rule `{pattern}` ({source}): {reason}"
            ),
            None => format!("`{command}` {verb} by the execution policy"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}:{line}: bad pattern `{pattern}`: {message}")]
    Pattern {
        path: PathBuf,
        line: usize,
        pattern: String,
        message: String,
    },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    pattern: toml::Spanned<String>,
    action: Action,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    risky: bool,
}

/// The built-in rules, in the same format users write.
pub const DEFAULTS: &str = r#"
[[rule]]
pattern = "rm -{rf,fr,Rf,fR,r -f,f -r} {/,/*,~,~/,$HOME,/home,/usr,/etc,/boot,/var}"
action = "forbid"
reason = "deletes the system or the home directory"

[[rule]]
pattern = "rm *--no-preserve-root*"
action = "forbid"
reason = "deletes the system"

[[rule]]
pattern = "{mkfs,mkfs.*,mke2fs,wipefs,fdisk,sfdisk,parted} *"
action = "forbid"
reason = "formats or repartitions a disk"

[[rule]]
pattern = "dd *of=/dev/*"
action = "forbid"
reason = "overwrites a device"

[[rule]]
pattern = "{shutdown,reboot,halt,poweroff}*"
action = "forbid"
reason = "stops the machine"

[[rule]]
pattern = "systemctl {poweroff,reboot,halt}*"
action = "forbid"
reason = "stops the machine"

[[rule]]
pattern = "git push *{--force,-f,--force-with-lease,+}*"
action = "forbid"
reason = "force-push rewrites shared history"

[[rule]]
pattern = "*{curl,wget}*|*{sh,bash,zsh,dash,python,python3,perl,ruby}"
action = "forbid"
reason = "pipes a download into an interpreter"

[[rule]]
pattern = "*{curl,wget}*|*{sh,bash,zsh,dash,python,python3,perl,ruby} *"
action = "forbid"
reason = "pipes a download into an interpreter"

[[rule]]
pattern = "chmod -R 777 /*"
action = "forbid"
reason = "opens the whole system to everyone"

[[rule]]
pattern = "git reset --hard*"
action = "allow"
risky = true
reason = "discards uncommitted work"

[[rule]]
pattern = "git clean *-*f*"
action = "allow"
risky = true
reason = "deletes untracked files"

[[rule]]
pattern = "git {checkout,restore} *."
action = "allow"
risky = true
reason = "discards uncommitted changes"

[[rule]]
pattern = "rm -*r*"
action = "allow"
risky = true
reason = "deletes a directory tree"
"#;

#[derive(Clone, Debug)]
pub struct Policy {
    rules: Vec<Rule>,
}

impl Policy {
    /// The built-in rules alone.
    pub fn builtin() -> Policy {
        let mut policy = Policy { rules: Vec::new() };
        // The defaults are tested; a failure here is a bug caught by the unit tests.
        if let Err(e) = policy.add_layer(DEFAULTS, Path::new("built-in")) {
            report_broken_builtin(&e);
        }
        policy
    }

    /// Built-in rules, then each existing file in order (later files win).
    pub fn load(files: &[PathBuf]) -> Result<Policy, PolicyError> {
        let mut policy = Policy::builtin();
        for path in files {
            if !path.exists() {
                continue;
            }
            let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
                path: path.clone(),
                source,
            })?;
            policy.add_layer(&text, path)?;
        }
        Ok(policy)
    }

    /// Adds a layer from TOML text; its rules outrank every earlier layer's.
    pub fn add_layer(&mut self, text: &str, path: &Path) -> Result<(), PolicyError> {
        let file: File = toml::from_str(text).map_err(|e| PolicyError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let layer = self.rules.iter().map(|r| r.layer + 1).max().unwrap_or(0);
        for raw in file.rule {
            let span = raw.pattern.span();
            let pattern = raw.pattern.into_inner();
            let line = text[..span.start.min(text.len())].lines().count().max(1);
            let matcher = Glob::new(&normalize_pattern(&pattern))
                .map_err(|e| PolicyError::Pattern {
                    path: path.to_path_buf(),
                    line,
                    pattern: pattern.clone(),
                    message: e.kind().to_string(),
                })?
                .compile_matcher();
            self.rules.push(Rule {
                pattern,
                action: raw.action,
                reason: raw.reason,
                risky: raw.risky,
                source: path.display().to_string(),
                layer,
                matcher,
            });
        }
        Ok(())
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The decision for a whole command line: the most severe over its simple commands (and
    /// the line as a whole, for rules about pipelines). Unmatched commands are allowed.
    pub fn decide(&self, command_line: &str) -> Decision {
        let mut units: Vec<String> = Vec::new();
        units::collect_units(command_line, &mut units);
        let mut decision = Decision {
            action: Action::Allow,
            risky: false,
            rule: None,
        };
        for unit in &units {
            let Some(rule) = self.deciding_rule(unit) else {
                continue;
            };
            decision.risky |= rule.risky;
            if rule.action > decision.action || (decision.rule.is_none() && rule.risky) {
                decision.action = decision.action.max(rule.action);
                decision.rule = Some((
                    rule.pattern.clone(),
                    rule.reason.clone(),
                    rule.source.clone(),
                ));
            }
        }
        decision
    }

    /// Among the rules matching `unit`, those of the latest layer; of them the most severe.
    fn deciding_rule(&self, unit: &str) -> Option<&Rule> {
        let matching: Vec<&Rule> = self
            .rules
            .iter()
            .filter(|r| r.matcher.is_match(unit))
            .collect();
        let top = matching.iter().map(|r| r.layer).max()?;
        matching
            .into_iter()
            .filter(|r| r.layer == top)
            .max_by_key(|r| (r.action, r.risky))
    }
}

fn report_broken_builtin(e: &PolicyError) {
    eprintln!("baton: built-in policy is broken: {e}");
}

/// Globs match across `/` (a command line is not a path).
fn normalize_pattern(pattern: &str) -> String {
    pattern.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[path = "policy_units.rs"]
mod units;

#[cfg(test)]
use units::split_segments;

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
