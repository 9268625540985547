//! Which lanes a run must run natively: `TIERCHECK_REQUIRE_LANES`, read the same way by
//! every test suite of the workspace (the golden harness, the thread and model suites,
//! and the architecture crates' own tests, which cannot depend on the harness).
//!
//! - unset or empty: no lane is required; a native trial that cannot run here is
//!   reported ignored with the reason;
//! - `a,b,...`: the named lanes are required: their native trials fail instead of
//!   being ignored;
//! - `auto`: the `require` list of this target's table (`targets/<triple>.toml`) for
//!   the CPU model in `QEMU_CPU` (unset or empty: the model whose `qemu_cpu` is `""`,
//!   the host itself). No such model is an error.
//!
//! The harness reads the same tables with a full TOML parser (`tiercheck_lanes::targets`);
//! [`parse_models`] reads only what this needs (each `[[model]]`'s `qemu_cpu` and
//! `require`), and a harness test checks that both agree on every committed table.

use std::path::PathBuf;

/// The target triple of this build as the tables name it (`x86_64-unknown-linux-gnu`,
/// `aarch64-unknown-linux-gnu`, ...).
pub fn triple() -> String {
    let env = if cfg!(target_env = "musl") { "musl" } else { "gnu" };
    format!("{}-unknown-{}-{env}", std::env::consts::ARCH, std::env::consts::OS)
}

/// The repository's `targets/` folder, or `$TIERCHECK_TARGETS_DIR`.
pub fn targets_dir() -> PathBuf {
    match std::env::var_os("TIERCHECK_TARGETS_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../targets")),
    }
}

/// One `[[model]]` of a target table: its `QEMU_CPU` value and its required lanes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Model {
    /// `qemu_cpu` (empty for the host itself).
    pub qemu_cpu: String,
    /// `require`.
    pub require: Vec<String>,
}

/// The lanes that must run natively in this run, from `TIERCHECK_REQUIRE_LANES` and
/// (for `auto`) `QEMU_CPU`; an error names what is wrong with the setting.
pub fn required_lanes() -> Result<Vec<String>, String> {
    let spec = std::env::var("TIERCHECK_REQUIRE_LANES").unwrap_or_default();
    let qemu_cpu = std::env::var("QEMU_CPU").unwrap_or_default();
    resolve(&spec, &qemu_cpu)
}

/// Whether `lane` must run natively in this run (see [`required_lanes`]).
pub fn lane_required(lane: &str) -> Result<bool, String> {
    Ok(required_lanes()?.iter().any(|l| l == lane))
}

/// [`required_lanes`] for a given setting and CPU model.
pub fn resolve(spec: &str, qemu_cpu: &str) -> Result<Vec<String>, String> {
    let spec = spec.trim();
    if spec != "auto" {
        return Ok(spec
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect());
    }
    let path = targets_dir().join(format!("{}.toml", triple()));
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!("TIERCHECK_REQUIRE_LANES=auto: cannot read {}: {e}", path.display())
    })?;
    let models = parse_models(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    models.into_iter().find(|m| m.qemu_cpu == qemu_cpu).map(|m| m.require).ok_or_else(|| {
        format!(
            "TIERCHECK_REQUIRE_LANES=auto: no model for QEMU_CPU={qemu_cpu:?} in {}",
            path.display()
        )
    })
}

/// A token of the small TOML subset the tables use.
#[derive(Clone, Debug, PartialEq)]
enum Token {
    /// `[[`
    OpenArrayTable,
    /// `]]` at the end of a `[[...` header.
    CloseArrayTable,
    /// `[`
    Open,
    /// `]`
    Close,
    /// `=`
    Equals,
    /// `,`
    Comma,
    /// A basic string (`"..."`, with `\"` and `\\` escapes).
    Str(String),
    /// A bare key, number or boolean.
    Bare(String),
    /// End of a line.
    Newline,
}

fn tokens(text: &str) -> Result<Vec<Token>, String> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut in_header = false;
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                while chars.peek().is_some_and(|&c| c != '\n') {
                    chars.next();
                }
            }
            '\n' => out.push(Token::Newline),
            c if c.is_whitespace() => {}
            '[' if out.last().is_none_or(|t| *t == Token::Newline)
                && chars.peek() == Some(&'[') =>
            {
                chars.next();
                in_header = true;
                out.push(Token::OpenArrayTable);
            }
            ']' if in_header && chars.peek() == Some(&']') => {
                chars.next();
                in_header = false;
                out.push(Token::CloseArrayTable);
            }
            '[' => out.push(Token::Open),
            ']' => out.push(Token::Close),
            '=' => out.push(Token::Equals),
            ',' => out.push(Token::Comma),
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None | Some('\n') => return Err("unterminated string".into()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('"') => s.push('"'),
                            Some('\\') => s.push('\\'),
                            other => return Err(format!("unsupported escape \\{other:?}")),
                        },
                        Some(c) => s.push(c),
                    }
                }
                out.push(Token::Str(s));
            }
            c if c.is_alphanumeric() || "_-.+".contains(c) => {
                let mut s = String::from(c);
                while let Some(&c) = chars.peek() {
                    if c.is_alphanumeric() || "_-.+".contains(c) {
                        s.push(c);
                        chars.next();
                    } else {
                        break;
                    }
                }
                out.push(Token::Bare(s));
            }
            other => return Err(format!("unexpected character {other:?}")),
        }
    }
    Ok(out)
}

/// A value: a string, an array of strings, or anything bare (ignored).
enum Value {
    Str(String),
    Strings(Vec<String>),
    Other,
}

/// The `[[model]]` entries of a target table: `qemu_cpu` and `require` of each
/// (missing keys are an error; every other key and table is skipped).
pub fn parse_models(text: &str) -> Result<Vec<Model>, String> {
    let toks = tokens(text)?;
    let mut i = 0;
    // (qemu_cpu, require) of the model being read; `None` outside `[[model]]`.
    let mut current: Option<(Option<String>, Option<Vec<String>>)> = None;
    let mut models = Vec::new();
    let finish = |m: Option<(Option<String>, Option<Vec<String>>)>,
                  models: &mut Vec<Model>|
     -> Result<(), String> {
        if let Some((cpu, req)) = m {
            let n = models.len() + 1;
            models.push(Model {
                qemu_cpu: cpu.ok_or(format!("[[model]] #{n} has no qemu_cpu"))?,
                require: req.ok_or(format!("[[model]] #{n} has no require"))?,
            });
        }
        Ok(())
    };
    while i < toks.len() {
        match &toks[i] {
            Token::Newline => i += 1,
            Token::OpenArrayTable => {
                let name = match (toks.get(i + 1), toks.get(i + 2)) {
                    (Some(Token::Bare(n)), Some(Token::CloseArrayTable)) => n.clone(),
                    _ => return Err("malformed [[...]] header".into()),
                };
                finish(current.take(), &mut models)?;
                current = (name == "model").then_some((None, None));
                i += 3;
            }
            Token::Open => {
                // A plain table header: leave any model.
                finish(current.take(), &mut models)?;
                while i < toks.len() && toks[i] != Token::Newline {
                    i += 1;
                }
            }
            Token::Bare(key) | Token::Str(key) => {
                let key = key.clone();
                if toks.get(i + 1) != Some(&Token::Equals) {
                    return Err(format!("expected `=` after `{key}`"));
                }
                i += 2;
                let value = match toks.get(i) {
                    Some(Token::Str(s)) => {
                        i += 1;
                        Value::Str(s.clone())
                    }
                    Some(Token::Open) => {
                        i += 1;
                        let mut items = Vec::new();
                        let mut strings = true;
                        loop {
                            match toks.get(i) {
                                None => return Err(format!("unterminated array for `{key}`")),
                                Some(Token::Close) => {
                                    i += 1;
                                    break;
                                }
                                Some(Token::Newline | Token::Comma) => i += 1,
                                Some(Token::Str(s)) => {
                                    items.push(s.clone());
                                    i += 1;
                                }
                                Some(_) => {
                                    strings = false;
                                    i += 1;
                                }
                            }
                        }
                        if strings {
                            Value::Strings(items)
                        } else {
                            Value::Other
                        }
                    }
                    Some(Token::Bare(_)) => {
                        i += 1;
                        Value::Other
                    }
                    _ => return Err(format!("no value for `{key}`")),
                };
                if let Some((cpu, req)) = current.as_mut() {
                    match (key.as_str(), value) {
                        ("qemu_cpu", Value::Str(s)) => *cpu = Some(s),
                        ("require", Value::Strings(v)) => *req = Some(v),
                        ("qemu_cpu" | "require", _) => {
                            return Err(format!("`{key}` has the wrong type"))
                        }
                        _ => {}
                    }
                }
            }
            other => return Err(format!("unexpected {other:?}")),
        }
    }
    finish(current.take(), &mut models)?;
    Ok(models)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = r#"
# comment
triple = "x86_64-unknown-linux-gnu"
lanes = ["ref", "x86_64-avx2"]   # trailing comment

[[model]]
name = "host"
qemu_cpu = ""                 # the machine itself
require = ["x86_64-avx2",
           "x86_64-avx2-repack"]
note = "has # inside a string"

[[model]]
name = "old"
qemu_cpu = "max,-avx2,-fma"
require = []
"#;

    #[test]
    fn reads_models_and_resolves_specs() {
        let m = parse_models(TABLE).unwrap();
        assert_eq!(
            m,
            vec![
                Model {
                    qemu_cpu: String::new(),
                    require: vec!["x86_64-avx2".into(), "x86_64-avx2-repack".into()]
                },
                Model { qemu_cpu: "max,-avx2,-fma".into(), require: vec![] },
            ]
        );
        assert_eq!(resolve("", "").unwrap(), Vec::<String>::new());
        assert_eq!(resolve(" a , b,", "").unwrap(), vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn malformed_tables_are_errors() {
        assert!(parse_models("[[model]]\nqemu_cpu = \"\"\n").unwrap_err().contains("no require"));
        assert!(parse_models("[[model]]\nrequire = []\n").unwrap_err().contains("no qemu_cpu"));
        assert!(parse_models("[[model]]\nqemu_cpu = 3\nrequire = []\n")
            .unwrap_err()
            .contains("wrong type"));
        assert!(parse_models("x = \"open\n").unwrap_err().contains("unterminated"));
        assert!(parse_models("x = [\"a\"\n").unwrap_err().contains("unterminated array"));
    }

    #[test]
    fn auto_reads_the_committed_table_of_this_target() {
        // Every committed table has a host model (`qemu_cpu = ""`) where one exists for
        // this build's triple.
        let path = targets_dir().join(format!("{}.toml", triple()));
        if path.exists() {
            let models = parse_models(&std::fs::read_to_string(&path).unwrap()).unwrap();
            for m in &models {
                assert_eq!(resolve("auto", &m.qemu_cpu).unwrap(), m.require);
            }
            assert!(resolve("auto", "no-such-cpu-model").unwrap_err().contains("no model"));
        } else {
            assert!(resolve("auto", "").unwrap_err().contains("cannot read"));
        }
    }
}
