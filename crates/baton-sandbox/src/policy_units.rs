//! What policy rules are matched against: the simple commands of a shell line, seen through
//! what only wraps them — `sudo`, `env`, `nice`, `timeout`, `nohup`, `xargs`, `find -exec`,
//! `sh -c` / `bash -lc` at any depth, `{ }`, `if`/`while`/`!`, redirections — with the program
//! reduced to its file name and `rm`'s spellings of "recursive, forced" made one.
//!
//! This is a guard rail against a confused model, not a boundary: a determined command can
//! always build its own (`$(printf …)`, a script file). The sandbox is the boundary.

use std::path::Path;

/// Nested `sh -c` lines followed at most this deep.
const MAX_DEPTH: usize = 8;

/// Each simple command of `line` (and of the lines it runs), words joined by single spaces,
/// and the whole line with its operators (for rules about pipelines).
pub(crate) fn collect_units(line: &str, out: &mut Vec<String>) {
    collect(line, 0, out);
}

fn collect(line: &str, depth: usize, out: &mut Vec<String>) {
    let segments = split_segments(line);
    let mut whole = Vec::new();
    let mut previous: Vec<String> = Vec::new();
    for (words, op) in &segments {
        let words = strip_keywords(&strip_redirections(words));
        if words.is_empty() {
            continue;
        }
        let piped = previous_output(&previous);
        let first = out.len();
        command_units(&words, depth, piped.as_deref(), out);
        if let Some(unit) = out.get(first).cloned() {
            whole.push(unit);
        }
        if let Some(op) = op {
            whole.push(op.clone());
        }
        previous = if op.as_deref() == Some("|") {
            words
        } else {
            Vec::new()
        };
    }
    if segments.len() > 1 {
        out.push(whole.join(" "));
    }
}

/// What `echo`/`printf` before a pipe hands to an `xargs` after it.
fn previous_output(words: &[String]) -> Option<Vec<String>> {
    match words.first().map(|w| program_name(w)).as_deref() {
        Some("echo" | "printf") => Some(
            words[1..]
                .iter()
                .filter(|w| !w.starts_with('-'))
                .cloned()
                .collect(),
        ),
        _ => None,
    }
}

/// The units of one simple command: the command itself (wrappers removed) first, then those
/// of what it runs.
fn command_units(words: &[String], depth: usize, piped: Option<&[String]>, out: &mut Vec<String>) {
    let mut rest = words;
    loop {
        while rest.first().is_some_and(|w| is_assignment(w)) {
            rest = &rest[1..];
        }
        let Some(first) = rest.first() else {
            return;
        };
        let name = program_name(first);
        match wrapped(&name, &rest[1..]) {
            Some(Wrapped::Command(skip)) => rest = &rest[1 + skip..],
            Some(Wrapped::Line(line)) => {
                if depth < MAX_DEPTH {
                    collect(&line, depth + 1, out);
                }
                return;
            }
            None => break,
        }
    }
    let mut unit: Vec<String> = rest.to_vec();
    unit[0] = program_name(&unit[0]);
    if unit[0] == "rm" {
        unit = normalize_rm(&unit);
    }
    out.push(unit.join(" "));
    let name = unit[0].clone();
    if depth >= MAX_DEPTH {
        return;
    }
    match name.as_str() {
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash" => {
            if let Some(script) = shell_script(&rest[1..]) {
                collect(script, depth + 1, out);
            }
        }
        "xargs" => {
            let start = 1 + options_end(&rest[1..], XARGS_VALUED);
            if start < rest.len() {
                let mut run: Vec<String> = rest[start..].to_vec();
                run.extend(piped.unwrap_or_default().iter().cloned());
                command_units(&run, depth + 1, None, out);
            }
        }
        "find" => {
            for run in find_exec(&rest[1..]) {
                command_units(&run, depth + 1, None, out);
            }
        }
        _ => {}
    }
}

enum Wrapped {
    /// The wrapped command starts after this many words.
    Command(usize),
    /// The wrapper runs this command line (`env -S`).
    Line(String),
}

/// If `name` only wraps the command that follows its options: where that command starts.
fn wrapped(name: &str, args: &[String]) -> Option<Wrapped> {
    let skip = match name {
        "nohup" | "setsid" | "exec" | "command" | "builtin" | "busybox" | "doas" => {
            options_end(args, &["-a"])
        }
        "sudo" => options_end(
            args,
            &["-u", "-g", "-p", "-C", "-h", "-r", "-t", "-U", "-D"],
        ),
        "time" => options_end(args, &["-f", "-o"]),
        "nice" => options_end(args, &["-n"]),
        "ionice" => options_end(args, &["-c", "-n"]),
        "stdbuf" => options_end(args, &["-i", "-o", "-e"]),
        "chrt" | "taskset" => {
            let options = options_end(args, &[]);
            // `chrt [options] PRIORITY CMD`, `taskset [options] MASK CMD`.
            (options + 1).min(args.len())
        }
        "timeout" => {
            let options = options_end(args, &["-s", "-k", "--signal", "--kill-after"]);
            // The duration.
            (options + 1).min(args.len())
        }
        "env" => {
            let mut i = 0;
            while let Some(arg) = args.get(i) {
                if let Some(line) = arg
                    .strip_prefix("--split-string=")
                    .or_else(|| (arg == "-S").then(|| args.get(i + 1).map(String::as_str))?)
                {
                    let after = if arg == "-S" { i + 2 } else { i + 1 };
                    let mut full = line.to_string();
                    for word in &args[after.min(args.len())..] {
                        full.push(' ');
                        full.push_str(&shell_quote(word));
                    }
                    return Some(Wrapped::Line(full));
                }
                match arg.as_str() {
                    "-u" | "--unset" | "-C" | "--chdir" => i += 2,
                    "--" => {
                        i += 1;
                        break;
                    }
                    a if a.starts_with('-') || is_assignment(a) => i += 1,
                    _ => break,
                }
            }
            i
        }
        _ => return None,
    };
    Some(Wrapped::Command(skip))
}

/// Options `xargs` takes with a value.
const XARGS_VALUED: &[&str] = &["-I", "-L", "-n", "-P", "-d", "-a", "-s", "-E", "-e"];

/// Where the options in `args` end: after `--`, or at the first word not starting with `-`
/// (`valued` options take the next word, unless joined to it).
fn options_end(args: &[String], valued: &[&str]) -> usize {
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            return i + 1;
        }
        if !arg.starts_with('-') || arg == "-" {
            break;
        }
        i += if valued.contains(&arg.as_str()) { 2 } else { 1 };
    }
    i.min(args.len())
}

/// The script of `sh -c SCRIPT`, `bash -lc SCRIPT`, `sh -x -c -- SCRIPT`, …
fn shell_script(args: &[String]) -> Option<&str> {
    let mut wants_script = false;
    for arg in args {
        if arg == "--" {
            continue;
        }
        if let Some(flags) = arg.strip_prefix('-').filter(|f| !f.starts_with('-')) {
            wants_script |= flags.contains('c');
            continue;
        }
        if arg.starts_with("--") {
            continue;
        }
        return wants_script.then_some(arg.as_str());
    }
    None
}

/// The commands `find` runs: each `-exec`/`-execdir`/`-ok`/`-okdir … ;` or `… +`, with `{}`
/// standing for the paths it starts from.
fn find_exec(args: &[String]) -> Vec<Vec<String>> {
    let starts: Vec<String> = args
        .iter()
        .take_while(|a| !a.starts_with('-') && !matches!(a.as_str(), "(" | "!" | ","))
        .cloned()
        .collect();
    let starts = if starts.is_empty() {
        vec![".".to_string()]
    } else {
        starts
    };
    let mut runs = Vec::new();
    let mut i = 0;
    while i < args.len() {
        if matches!(args[i].as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            let end = args[i + 1..]
                .iter()
                .position(|a| a == ";" || a == "+")
                .map_or(args.len(), |p| i + 1 + p);
            for start in &starts {
                let run: Vec<String> = args[i + 1..end]
                    .iter()
                    .map(|a| a.replace("{}", start))
                    .collect();
                if !run.is_empty() {
                    runs.push(run);
                }
            }
            i = end;
        }
        i += 1;
    }
    runs
}

/// `rm` with its flags in one canonical form: `-r`, `-R`, `--recursive` and `-f`, `--force`,
/// in any order or combination, become `-rf` (or `-r` / `-f`); `--no-preserve-root` stays;
/// other options and `--` go.
fn normalize_rm(words: &[String]) -> Vec<String> {
    let (mut recursive, mut force, mut no_preserve) = (false, false, false);
    let mut operands = Vec::new();
    let mut options_done = false;
    for word in &words[1..] {
        if options_done || !word.starts_with('-') || word == "-" {
            operands.push(word.clone());
            continue;
        }
        match word.as_str() {
            "--" => options_done = true,
            "--recursive" => recursive = true,
            "--force" => force = true,
            "--no-preserve-root" => no_preserve = true,
            long if long.starts_with("--") => {}
            short => {
                recursive |= short.contains(['r', 'R']);
                force |= short.contains('f');
            }
        }
    }
    let mut out = vec!["rm".to_string()];
    match (recursive, force) {
        (true, true) => out.push("-rf".into()),
        (true, false) => out.push("-r".into()),
        (false, true) => out.push("-f".into()),
        (false, false) => {}
    }
    if no_preserve {
        out.push("--no-preserve-root".into());
    }
    out.extend(operands);
    out
}

/// Redirections (`>f`, `2>&1`, `< in`, `&>f`, `>>f`, `2> f`) anywhere in a command: not part of
/// what runs.
fn strip_redirections(words: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        let operator_at = word.trim_start_matches(|c: char| c.is_ascii_digit() || c == '&');
        let is_redirection = operator_at.starts_with(['>', '<']);
        if is_redirection {
            let target_joined = operator_at.trim_start_matches(['>', '<', '&', '|']);
            i += if target_joined.is_empty() { 2 } else { 1 };
            continue;
        }
        out.push(word.clone());
        i += 1;
    }
    out
}

/// Shell keywords and grouping around a command: `{ … }`, `if`/`then`/`elif`/`else`,
/// `while`/`until`/`do`, `!`, and a segment that is only `fi`, `done`, `esac` or `}`.
fn strip_keywords(words: &[String]) -> Vec<String> {
    let mut rest = words;
    while let Some(first) = rest.first() {
        match first.as_str() {
            "{" | "!" | "if" | "then" | "elif" | "else" | "while" | "until" | "do" => {
                rest = &rest[1..]
            }
            _ => break,
        }
    }
    while let Some(last) = rest.last() {
        match last.as_str() {
            "}" | "fi" | "done" | "esac" => rest = &rest[..rest.len() - 1],
            _ => break,
        }
    }
    rest.to_vec()
}

/// `/usr/bin/rm` → `rm`.
fn program_name(word: &str) -> String {
    Path::new(word)
        .file_name()
        .map_or_else(|| word.to_string(), |n| n.to_string_lossy().into_owned())
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// A word as the shell would read it back (for `env -S`'s trailing arguments).
fn shell_quote(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Splits a shell line into simple commands (as unquoted words) and the operator after each:
/// `|`, `||`, `&&`, `;`, `&`, newlines and parentheses separate; quotes and backslashes are
/// honoured.
pub(crate) fn split_segments(line: &str) -> Vec<(Vec<String>, Option<String>)> {
    let mut segments = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    let finish_word = |word: &mut String, in_word: &mut bool, words: &mut Vec<String>| {
        if *in_word {
            words.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    word.push(c);
                }
            }
            '"' => {
                in_word = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                word.push(n);
                            }
                        }
                        c => word.push(c),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            '|' | '&' | ';' | '\n' | '(' | ')' => {
                // `;` right after `\` was pushed above; a bare `;` ends the command, but in
                // `find … -exec … \;` it arrives escaped as a word.
                finish_word(&mut word, &mut in_word, &mut words);
                let mut op = c.to_string();
                if matches!(c, '|' | '&') && chars.peek() == Some(&c) {
                    chars.next();
                    op.push(c);
                }
                // `2>&1` and `&>` are redirections, not operators.
                if c == '&'
                    && op == "&"
                    && (words.last().is_some_and(|w| w.ends_with('>'))
                        || chars.peek() == Some(&'>'))
                {
                    word.push('&');
                    in_word = true;
                    continue;
                }
                segments.push((std::mem::take(&mut words), Some(op)));
            }
            c if c.is_whitespace() => finish_word(&mut word, &mut in_word, &mut words),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    finish_word(&mut word, &mut in_word, &mut words);
    segments.push((words, None));
    segments.retain(|(w, _)| !w.is_empty());
    if let Some((_, op)) = segments.last_mut() {
        *op = None;
    }
    segments
}
